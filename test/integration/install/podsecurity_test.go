package install

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
)

// TestPodSecurity: issue #38 point 2. Evaluated with Kubernetes' own Pod
// Security checks (the library the PodSecurity admission plugin runs):
// rota-scheduler and rota-schedule-controller meet restricted; the driver
// falls short of baseline only by what its work needs — hostPath volumes
// (the kubelet's plugin directories, the CDI directory) and, where it
// time-slices real GPUs, privileged — and of restricted also by running as
// root (it writes root-owned host directories). rota-system's labels
// enforce the level the driver needs and warn and audit at baseline.
func TestPodSecurity(t *testing.T) {
	eval, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	// forbidden is what the level forbids in the workload's pod template.
	forbidden := func(o *unstructured.Unstructured, level psaapi.Level) []string {
		meta, _, _ := unstructured.NestedMap(o.Object, "spec", "template", "metadata")
		labels, _, _ := unstructured.NestedStringMap(meta, "labels")
		var reasons []string
		for _, r := range eval.EvaluatePod(psaapi.LevelVersion{Level: level, Version: psaapi.LatestVersion()},
			&metav1.ObjectMeta{Labels: labels}, podSpec(t, o)) {
			if !r.Allowed {
				reasons = append(reasons, r.ForbiddenReason)
			}
		}
		slices.Sort(reasons)
		return reasons
	}
	check := func(t *testing.T, objs []*unstructured.Unstructured, privileged bool) {
		for _, c := range []struct {
			kind, name string
			level      psaapi.Level
			want       []string
		}{
			{"Deployment", "rota-scheduler", psaapi.LevelRestricted, nil},
			{"Deployment", "rota-schedule-controller", psaapi.LevelRestricted, nil},
			{"DaemonSet", "rota-dra-kubelet-plugin", psaapi.LevelBaseline, func() []string {
				if privileged {
					return []string{"hostPath volumes", "privileged"}
				}
				return []string{"hostPath volumes"}
			}()},
			{"DaemonSet", "rota-dra-kubelet-plugin", psaapi.LevelRestricted, func() []string {
				if privileged {
					return []string{"allowPrivilegeEscalation != false", "privileged", "restricted volume types", "runAsNonRoot != true", "seccompProfile", "unrestricted capabilities"}
				}
				return []string{"restricted volume types", "runAsNonRoot != true"}
			}()},
		} {
			o := find(objs, c.kind, c.name)
			if o == nil {
				t.Fatalf("no %s %s", c.kind, c.name)
			}
			if got := forbidden(o, c.level); !slices.Equal(got, c.want) {
				t.Errorf("%s %s at %s: forbidden %q, want %q", c.kind, c.name, c.level, got, c.want)
			}
		}
	}

	t.Run("kustomize install", func(t *testing.T) {
		objs := render(t, "base")
		check(t, objs, true)
		ns := find(objs, "Namespace", "rota-system")
		if ns == nil {
			t.Fatal("no Namespace rota-system")
		}
		want := map[string]string{
			psaapi.EnforceLevelLabel: string(psaapi.LevelPrivileged), psaapi.EnforceVersionLabel: "latest",
			psaapi.WarnLevelLabel: string(psaapi.LevelBaseline), psaapi.WarnVersionLabel: "latest",
			psaapi.AuditLevelLabel: string(psaapi.LevelBaseline), psaapi.AuditVersionLabel: "latest",
		}
		for k, v := range want {
			if got := ns.GetLabels()[k]; got != v {
				t.Errorf("rota-system label %s=%q, want %q", k, got, v)
			}
		}
	})
	t.Run("chart with driver.privileged false", func(t *testing.T) {
		check(t, mustRenderChart(t, loadChart(t), allValues(t)), false)
	})
}
