package security

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/test/integration/framework"
)

// TestBorrowerMarkOnlyTheScheduler: issue #41 point 2. The borrower mark
// (rota.dev/borrowed) makes a pod's GPUs reclaimable; a tenant that could
// shed it would keep what it borrowed, and one that could set it would
// skew the accounting. The shipped policy rota-borrower-mark lets only
// rota-scheduler write it; the scheduler's own pod-writes policy lets its
// token write it and the checkpoint request, and nothing else.
func TestBorrowerMarkOnlyTheScheduler(t *testing.T) {
	e := setup(t)
	e.cp.ApplyManifests(t, "manifests/scheduler/deployment.yaml", "manifests/scheduler/pod-writes-policy.yaml")
	l := newLedger(t)
	sched, err := kubernetes.NewForConfig(e.cp.ImpersonateServiceAccount(paramsNS, rotaScheduler))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "trainer", Namespace: teamA},
		Spec:       v1.PodSpec{SchedulerName: rotaScheduler, Containers: []v1.Container{{Name: "main", Image: "registry.example.com/trainer:1.0"}}},
	}
	if _, err := e.alice.CoreV1().Pods(teamA).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	mark := func(client kubernetes.Interface, value any, opts metav1.PatchOptions) func(context.Context) error {
		return func(ctx context.Context) error {
			raw, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{gpuv1.BorrowedAnnotation: value}}})
			if err != nil {
				return err
			}
			_, err = client.CoreV1().Pods(teamA).Patch(ctx, pod.Name, types.MergePatchType, raw, opts)
			return err
		}
	}
	dry := metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}}
	framework.WaitFor(t, "the borrower-mark policy to decide", func(ctx context.Context) (bool, string, error) {
		err := mark(e.alice, "H100=1", dry)(ctx)
		return err != nil, fmt.Sprint(err), nil
	})

	// What the scheduler's code does: mark a borrower before it binds,
	// remove a stale mark, and ask for a checkpoint.
	if err := mark(sched, "H100=2", metav1.PatchOptions{})(ctx); err != nil {
		t.Fatalf("the scheduler marks a borrower: %v", err)
	}
	if err := mark(sched, "H100=1", metav1.PatchOptions{})(ctx); err != nil {
		t.Fatalf("the scheduler changes a mark: %v", err)
	}
	ask := []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:"2026-12-06T10:00:00Z"}}}`, gpuv1.CheckpointRequestedAnnotation))
	if _, err := sched.CoreV1().Pods(teamA).Patch(ctx, pod.Name, types.MergePatchType, ask, metav1.PatchOptions{}); err != nil {
		t.Fatalf("the scheduler asks for a checkpoint: %v", err)
	}
	// The workload acknowledges, and its owner may annotate freely.
	ack := []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:"2026-12-06T10:00:00Z","team-a.example.com/note":"x"}}}`, gpuv1.CheckpointedAnnotation))
	if _, err := e.alice.CoreV1().Pods(teamA).Patch(ctx, pod.Name, types.MergePatchType, ack, metav1.PatchOptions{}); err != nil {
		t.Fatalf("the tenant acknowledges the checkpoint: %v", err)
	}

	const denied = "rota-borrower-mark"
	l.hostile(t, "tenant removes the borrower mark", mark(e.alice, nil, dry), denied, "only rota-scheduler")
	l.hostile(t, "tenant lowers the borrower mark", mark(e.alice, "H100=0", dry), denied)
	l.hostile(t, "tenant creates a pod already marked", func(ctx context.Context) error {
		p := pod.DeepCopy()
		p.Name, p.ResourceVersion = "premarked", ""
		p.Annotations = map[string]string{gpuv1.BorrowedAnnotation: "H100=1"}
		_, err := e.alice.CoreV1().Pods(teamA).Create(ctx, p, dryRun)
		return err
	}, denied, "cannot be created with the rota.dev/borrowed annotation")
	l.hostile(t, "tenant replaces the pod's annotations without the mark", func(ctx context.Context) error {
		cur, err := e.alice.CoreV1().Pods(teamA).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Annotations = map[string]string{"team-a.example.com/note": "y"}
		_, err = e.alice.CoreV1().Pods(teamA).Update(ctx, cur, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}, denied)
	if err := mark(sched, nil, metav1.PatchOptions{})(ctx); err != nil {
		t.Fatalf("the scheduler removes the mark: %v", err)
	}
	l.hostile(t, "tenant marks its own pod", mark(e.alice, "H100=1", dry), denied)
}
