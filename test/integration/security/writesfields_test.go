package security

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"

	"github.com/rota-dev/rota/test/integration/framework"
)

// TestWritesPolicyListsEveryField: CEL cannot compare a structure with one
// field left out, so rota-schedule-controller-writes compares the fields a
// transition must keep one by one. When Kubernetes (or LeaderWorkerSet)
// adds a field, this test names it until the policy compares it too;
// otherwise a stolen controller token could change it unchecked.
func TestWritesPolicyListsEveryField(t *testing.T) {
	var validations []map[string]any
	for _, m := range framework.Manifests(t, "manifests/schedule-controller/writes-policy.yaml") {
		if m.Object.GetKind() != "ValidatingAdmissionPolicy" {
			continue
		}
		vs, _, err := unstructured.NestedSlice(m.Object.Object, "spec", "validations")
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range vs {
			validations = append(validations, v.(map[string]any))
		}
	}
	// expression is the validation whose message contains message.
	expression := func(message string) string {
		for _, v := range validations {
			if m, _ := v["message"].(string); strings.Contains(m, message) {
				e, _ := v["expression"].(string)
				return e
			}
		}
		t.Fatalf("no validation with message %q", message)
		return ""
	}
	for _, c := range []struct {
		typ     any
		message string
		changes []string // the fields a transition may change
	}{
		{v1.PodSpec{}, "may not change a pod template", []string{"resourceClaims"}},
		{appsv1.DeploymentSpec{}, "of a Deployment", []string{"replicas", "template"}},
		{appsv1.StatefulSetSpec{}, "of a StatefulSet", []string{"replicas", "template"}},
		{lwsv1.LeaderWorkerSetSpec{}, "of a LeaderWorkerSet", []string{"replicas", "leaderWorkerTemplate"}},
		{lwsv1.LeaderWorkerTemplate{}, "of a LeaderWorkerSet", []string{"leaderTemplate", "workerTemplate"}},
	} {
		expr := expression(c.message)
		rt := reflect.TypeOf(c.typ)
		for i := range rt.NumField() {
			field := strings.Split(rt.Field(i).Tag.Get("json"), ",")[0]
			if field == "" || field == "-" || slices.Contains(c.changes, field) {
				continue
			}
			if !strings.Contains(expr, ".?"+field+" == ") {
				t.Errorf("%s.%s is not compared by the validation %q of rota-schedule-controller-writes", rt.Name(), field, c.message)
			}
		}
	}
}
