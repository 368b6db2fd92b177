package tiering

import (
	"context"
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/scheduler"
	"github.com/rota-dev/rota/test/integration/framework"
)

// gangMember is a one-H100 member of a gang of two: Gang holds the first
// member placed at Permit until the second is placed, which leaves time to
// change the cluster between the scheduling and the binding of a placement.
func gangMember(ns, gang string, i int) *v1.Pod {
	p := framework.GPUPod(ns, fmt.Sprintf("%s-%d", gang, i), scheduler.ProfileName, "one-h100")
	p.Labels = map[string]string{"rota.dev/gang": gang}
	p.Annotations = map[string]string{"rota.dev/gang-size": "2"}
	return p
}

// bindFailCluster has n1 with one H100 and n2, cordoned, with two, and
// Rota's scheduler with a Gang wait limit long enough for the test. Both
// members of a gang of two are created: the first is placed on n1 and held
// at Permit, the second waits for n2 (Gang counts n2's GPUs as free, so it
// lets the gang start). It returns the held member.
func bindFailCluster(t *testing.T, ns, gang string) (*framework.ControlPlane, *v1.Pod) {
	t.Helper()
	cp := framework.StartControlPlane(t)
	cordoned := framework.Node("n2")
	cordoned.Spec.Unschedulable = true
	cp.Create(t, framework.DeviceClass(), framework.Namespace(ns),
		framework.TieredClaimTemplate(ns, "one-h100", framework.ModelTier("H100")),
		framework.Node("n1"), framework.GPUSlice("n1", framework.H100),
		cordoned, framework.GPUSlice("n2", framework.GPUs(framework.H100, 2)...))
	// Both members exist before the scheduler starts: a member Gang
	// refused for a missing member is not retried before its backoff.
	held, other := gangMember(ns, gang, 0), gangMember(ns, gang, 1)
	cp.Create(t, held, other)
	cp.StartClaimController(t)
	cp.StartSchedulerWithPluginArgs(t, map[string]any{"Gang": map[string]any{"waitLimit": "2m"}})
	framework.WaitFor(t, "one member held at Permit, the other waiting", func(ctx context.Context) (bool, string, error) {
		var states []string
		holding := false
		for _, p := range []*v1.Pod{held, other} {
			got, err := cp.Client.CoreV1().Pods(ns).Get(ctx, p.Name, metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			for _, c := range got.Status.Conditions {
				if c.Type == gpuv1.WaitingCondition {
					states = append(states, p.Name+": "+c.Message)
					holding = holding || strings.Contains(c.Message, "1 of 2 members placed")
				}
			}
		}
		return holding, strings.Join(states, "; "), nil
	})
	// Which member Gang holds is the queue's choice; the held one is on n1.
	for _, p := range []*v1.Pod{held, other} {
		got, err := cp.Client.CoreV1().Pods(ns).Get(context.Background(), p.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range got.Status.Conditions {
			if c.Type == gpuv1.WaitingCondition && strings.Contains(c.Message, "1 of 2 members placed") {
				return cp, p
			}
		}
	}
	t.Fatal("no member held")
	return nil, nil
}

// uncordon lets the scheduler place pods on n2.
func uncordon(t *testing.T, cp *framework.ControlPlane) {
	t.Helper()
	if _, err := cp.Client.CoreV1().Nodes().Patch(context.Background(), "n2", types.MergePatchType, []byte(`{"spec":{"unschedulable":false}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// bindingFailures reads rota_tiering_binding_failures_total{cause,stage}
// from the in-process scheduler's registry.
func bindingFailures(t *testing.T, cause, stage string) float64 {
	t.Helper()
	return metricValue(t, "rota_tiering_binding_failures_total", map[string]string{"cause": cause, "stage": stage})
}

// failedSchedulingWith waits for a FailedScheduling event of the pod that
// contains want and returns it.
func failedSchedulingWith(t *testing.T, cp *framework.ControlPlane, pod *v1.Pod, want string) string {
	t.Helper()
	var found string
	framework.WaitFor(t, fmt.Sprintf("FailedScheduling of %s with %q", pod.Name, want), func(context.Context) (bool, string, error) {
		notes := cp.PodEventNotes(t, pod, "FailedScheduling")
		for _, n := range notes {
			if strings.Contains(n, want) {
				found = n
				return true, n, nil
			}
		}
		state := strings.Join(notes, " | ")
		pods, err := cp.Client.CoreV1().Pods(pod.Namespace).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		for _, p := range pods.Items {
			state += fmt.Sprintf("; %s on %q:", p.Name, p.Spec.NodeName)
			for _, c := range p.Status.Conditions {
				state += fmt.Sprintf(" %s=%s(%s: %s)", c.Type, c.Status, c.Reason, c.Message)
			}
		}
		return false, state, nil
	})
	return found
}

// TestBindingFailureNodeLost: the node a placement was made on is removed
// while the pod waits at Permit. Its binding fails with NodeLost — in the
// scheduler's message and in the metric — and the pod is placed again on
// the node that is left.
func TestBindingFailureNodeLost(t *testing.T) {
	const ns = "bindfail"
	before := bindingFailures(t, "NodeLost", "prebind")
	cp, held := bindFailCluster(t, ns, "lost")
	ctx := context.Background()
	if err := cp.Client.CoreV1().Nodes().Delete(ctx, "n1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cp.Client.ResourceV1().ResourceSlices().Delete(ctx, framework.GPUSlice("n1").Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	uncordon(t, cp)
	msg := failedSchedulingWith(t, cp, held, "NodeLost: node n1 was removed before binding")
	t.Logf("%s: %s", held.Name, msg)
	for _, name := range []string{"lost-0", "lost-1"} {
		if p := cp.WaitForPodBound(t, ns, name); p.Spec.NodeName != "n2" {
			t.Errorf("%s bound to %s, want n2", name, p.Spec.NodeName)
		}
	}
	if got := bindingFailures(t, "NodeLost", "prebind") - before; got < 1 {
		t.Errorf("rota_tiering_binding_failures_total{cause=NodeLost,stage=prebind} rose by %v, want at least 1", got)
	}
}

// TestBindingFailureStaleSlice: n1's driver republishes its slice with its
// GPU under another device name while a pod holding it waits at Permit.
// Its binding fails with StaleResourceSlice, and it is placed again on a
// device the slices publish now.
func TestBindingFailureStaleSlice(t *testing.T) {
	const ns = "bindfail"
	before := bindingFailures(t, "StaleResourceSlice", "prebind")
	cp, held := bindFailCluster(t, ns, "stale")
	ctx := context.Background()
	old, err := cp.Client.ResourceV1().ResourceSlices().Get(ctx, framework.GPUSlice("n1").Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	renamed := old.DeepCopy()
	renamed.Spec.Devices[0].Name = "gpu-7"
	renamed.Spec.Pool.Generation++
	if _, err := cp.Client.ResourceV1().ResourceSlices().Update(ctx, renamed, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	uncordon(t, cp)
	msg := failedSchedulingWith(t, cp, held, "StaleResourceSlice: device gpu.rota.dev/n1/gpu-0 on node n1 is no longer published")
	t.Logf("%s: %s", held.Name, msg)
	for _, name := range []string{"stale-0", "stale-1"} {
		p := cp.WaitForPodBound(t, ns, name)
		claim := cp.PodClaim(t, p, "gpu")
		for _, r := range claim.Status.Allocation.Devices.Results {
			if r.Pool == "n1" && r.Device == "gpu-0" {
				t.Errorf("%s holds n1/gpu-0, which n1 no longer publishes", name)
			}
		}
	}
	if got := bindingFailures(t, "StaleResourceSlice", "prebind") - before; got < 1 {
		t.Errorf("rota_tiering_binding_failures_total{cause=StaleResourceSlice,stage=prebind} rose by %v, want at least 1", got)
	}
}
