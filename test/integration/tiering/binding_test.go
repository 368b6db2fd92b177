package tiering

import (
	"context"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/scheduler"
	"github.com/rota-dev/rota/test/integration/framework"
)

// TestTierAnnotationComesWithBinding: with the shipped profile, a tiered
// pod's rota.dev/tier annotation is written by its binding — the first
// version of the pod that has a node already carries it, and no client ever
// wrote it in an update or patch of its own — while a pod without claims is
// bound by DefaultBinder and gets no annotation.
func TestTierAnnotationComesWithBinding(t *testing.T) {
	cp := framework.StartControlPlane(t)
	const ns = "binding"
	cp.Create(t,
		framework.DeviceClass(),
		framework.Node("node-a100"), framework.GPUSlice("node-a100", framework.A100),
		framework.Node("node-h100"), framework.GPUSlice("node-h100", framework.H100),
		framework.Namespace(ns),
		framework.TieredClaimTemplate(ns, "h100-else-a100", framework.ModelTier("H100"), framework.ModelTier("A100")),
	)
	cp.StartClaimController(t)
	cp.StartScheduler(t)

	// Every version of every pod in the namespace, from before the first pod;
	// the watch ends, failing the test, if they are not all bound in time.
	ctx, cancel := context.WithTimeout(context.Background(), framework.DefaultTimeout)
	defer cancel()
	list, err := cp.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := cp.Client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	cp.Create(t, framework.GPUPod(ns, "tiered", scheduler.ProfileName, "h100-else-a100"))
	cp.Create(t, &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "plain"},
		Spec: v1.PodSpec{
			SchedulerName: scheduler.ProfileName,
			Containers:    []v1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10"}},
		},
	})

	firstBound := firstBoundVersions(t, w, "tiered", "plain")
	if got := firstBound["tiered"].Annotations[gpuv1.TierAnnotation]; got != "1/2: H100" {
		t.Errorf("tiered pod when it got its node: %s=%q, want \"1/2: H100\" written with the binding (annotations %v)",
			gpuv1.TierAnnotation, got, firstBound["tiered"].Annotations)
	}
	if got, ok := firstBound["plain"].Annotations[gpuv1.TierAnnotation]; ok {
		t.Errorf("pod without claims has %s=%q, want none", gpuv1.TierAnnotation, got)
	}

	// PostBind still explains the placement. Once its Event is there, no
	// manager owns the annotation in managedFields, as one would after an
	// update or patch of the pod (the binding subresource records none).
	tiered := cp.WaitForPodBound(t, ns, "tiered")
	framework.WaitFor(t, "TieredPlacement event on the tiered pod", func(context.Context) (bool, string, error) {
		notes := cp.PodEventNotes(t, tiered, "TieredPlacement")
		return len(notes) == 1, strings.Join(notes, " | "), nil
	})
	tiered, err = cp.Client.CoreV1().Pods(ns).Get(context.Background(), "tiered", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range tiered.ManagedFields {
		if mf.FieldsV1 != nil && strings.Contains(mf.FieldsV1.GetRawString(), `"f:`+gpuv1.TierAnnotation+`"`) {
			t.Errorf("manager %q (%s %s) wrote %s in a pod write of its own", mf.Manager, mf.Operation, mf.Subresource, gpuv1.TierAnnotation)
		}
	}
}

// firstBoundVersions reads the watch until each named pod has been seen
// with a node, and returns that first bound version of each.
func firstBoundVersions(t *testing.T, w watch.Interface, names ...string) map[string]*v1.Pod {
	t.Helper()
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	bound := map[string]*v1.Pod{}
	for len(bound) < len(names) {
		ev, ok := <-w.ResultChan()
		if !ok {
			t.Fatalf("pod watch ended with %d of %d pods bound", len(bound), len(names))
		}
		pod, isPod := ev.Object.(*v1.Pod)
		if !isPod {
			t.Fatalf("pod watch: unexpected %s event %T %v", ev.Type, ev.Object, ev.Object)
		}
		if _, seen := bound[pod.Name]; want[pod.Name] && !seen && pod.Spec.NodeName != "" {
			bound[pod.Name] = pod
		}
	}
	return bound
}
