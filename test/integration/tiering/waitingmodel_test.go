package tiering

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rota-dev/rota/pkg/scheduler"
	"github.com/rota-dev/rota/test/integration/framework"
)

// TestWaitsPerModel (#40, signals): rota_admission_waiting_pods counts
// the pods that wait now by the model of their first tier and reason, and
// rota_admission_unplaced_wait_seconds observes, when such a pod is
// deleted without ever being placed, how long it had waited. One H100; two
// pods asking for it: the second waits InsufficientCapacity under model
// H100, then is deleted.
func TestWaitsPerModel(t *testing.T) {
	cp := framework.StartControlPlane(t)
	const ns = "waits"
	cp.Create(t,
		framework.DeviceClass(),
		framework.Node("node-h100"), framework.GPUSlice("node-h100", framework.H100),
		framework.Namespace(ns),
		framework.TieredClaimTemplate(ns, "h100", framework.ModelTier("H100")),
	)
	cp.StartClaimController(t)
	cp.StartScheduler(t)
	unplacedBefore := metricValue(t, "rota_admission_unplaced_wait_seconds", map[string]string{"model": "H100", "reason": "InsufficientCapacity"})

	cp.Create(t, framework.GPUPod(ns, "first", scheduler.ProfileName, "h100"))
	cp.WaitForPodBound(t, ns, "first")
	waiting := map[string]string{"model": "H100", "reason": "InsufficientCapacity"}
	// Other tests' schedulers in this process share the registry.
	waitingBefore := metricValue(t, "rota_admission_waiting_pods", waiting)
	cp.Create(t, framework.GPUPod(ns, "second", scheduler.ProfileName, "h100"))
	framework.WaitFor(t, "the second pod counted as waiting for an H100", func(context.Context) (bool, string, error) {
		v := metricValue(t, "rota_admission_waiting_pods", waiting) - waitingBefore
		return v == 1, fmt.Sprintf("waiting_pods +%v (%s)", v, series(t, "rota_admission_waiting_pods")), nil
	})

	if err := cp.Client.CoreV1().Pods(ns).Delete(context.Background(), "second", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	framework.WaitFor(t, "the deleted pod's wait observed", func(context.Context) (bool, string, error) {
		n := metricValue(t, "rota_admission_unplaced_wait_seconds", waiting) - unplacedBefore
		w := metricValue(t, "rota_admission_waiting_pods", waiting) - waitingBefore
		return n == 1 && w == 0, fmt.Sprintf("unplaced +%v, waiting +%v", n, w), nil
	})
}
