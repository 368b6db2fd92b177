package controller

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// TestRBACCoversEveryCall drives transitions through stop, start, preflight,
// capacity preview and alias checks and verifies that every API call the
// controller made is allowed by manifests/schedule-controller/rbac.yaml, so
// the least-privilege role is also a sufficient one. (The informer's watch and
// the Track H template create/reservation get are listed there by reading the
// code; the informer is not started in unit tests.)
func TestRBACCoversEveryCall(t *testing.T) {
	rules := loadRules(t)
	e := newEnv(t, at(19, 7, 59), poolObjects()...)
	e.create(&v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "chat"},
		Spec: v1.ServiceSpec{Selector: map[string]string{"app": "md-llama70b"}}})
	e.addSchedule(weekSchedule())
	e.mustPass("pool")
	e.clock.SetTime(at(19, 8, 0))
	e.converge("pool", 10)
	e.clock.SetTime(at(19, 18, 0))
	e.converge("pool", 10)
	checkCalls(t, rules, e.calls)

	// The same with llama70b served by a LeaderWorkerSet.
	e = lwsPool(t)
	for _, now := range []time.Time{at(19, 8, 0), at(19, 18, 0)} {
		e.clock.SetTime(now)
		e.passesWithLWS(5)
	}
	if !e.calls["update leaderworkerset.x-k8s.io/leaderworkersets"] {
		t.Errorf("the LeaderWorkerSet run never updated the LeaderWorkerSet; calls: %v", e.calls)
	}
	checkCalls(t, rules, e.calls)
}

func checkCalls(t *testing.T, rules []rbacv1.PolicyRule, seen map[string]bool) {
	t.Helper()
	calls := make([]string, 0, len(seen))
	for c := range seen {
		calls = append(calls, c)
	}
	sort.Strings(calls)
	for _, c := range calls {
		verb, res, _ := strings.Cut(c, " ")
		group, resource, _ := strings.Cut(res, "/")
		if !allowed(rules, verb, group, resource) {
			t.Errorf("controller call %q is not allowed by rbac.yaml", c)
		}
	}
	t.Logf("calls made: %s", strings.Join(calls, ", "))
}

func loadRules(t *testing.T) []rbacv1.PolicyRule {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "manifests", "schedule-controller", "rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var rules []rbacv1.PolicyRule
	for _, doc := range strings.Split(string(data), "\n---") {
		var role rbacv1.ClusterRole // Role has the same shape for rules
		if err := yaml.Unmarshal([]byte(doc), &role); err != nil {
			t.Fatalf("rbac.yaml: %v", err)
		}
		if role.Kind == "ClusterRole" || role.Kind == "Role" {
			rules = append(rules, role.Rules...)
		}
	}
	return rules
}

func allowed(rules []rbacv1.PolicyRule, verb, group, resource string) bool {
	for _, r := range rules {
		if has(r.APIGroups, group) && has(r.Resources, resource) && has(r.Verbs, verb) {
			return true
		}
	}
	return false
}

func has(list []string, s string) bool {
	for _, x := range list {
		if x == s || x == "*" {
			return true
		}
	}
	return false
}
