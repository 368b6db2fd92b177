package security

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/test/integration/framework"
)

// TestSchedulerWritesOnlyItsAnnotations: RBAC lets rota-scheduler's token
// patch every pod of the cluster and create and renew leases in
// rota-system. The shipped policy rota-scheduler-pod-writes keeps its pod
// writes to the two annotations the scheduler writes, and its Lease role
// names its own lease, so a stolen token can neither swap a container's
// image nor take the schedule controller's leadership.
func TestSchedulerWritesOnlyItsAnnotations(t *testing.T) {
	e := setup(t)
	e.cp.ApplyManifests(t, "manifests/scheduler/deployment.yaml", "manifests/scheduler/pod-writes-policy.yaml")
	l := newLedger(t)
	sched, err := kubernetes.NewForConfig(e.cp.ImpersonateServiceAccount(paramsNS, rotaScheduler))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "trainer", Namespace: teamA,
			Labels:      map[string]string{"app": "trainer"},
			Annotations: map[string]string{"team-a.example.com/owner": "alice"},
		},
		Spec: v1.PodSpec{SchedulerName: rotaScheduler, Containers: []v1.Container{{Name: "main", Image: "registry.example.com/trainer:1.0"}}},
	}
	if _, err := e.cp.Client.CoreV1().Pods(teamA).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	patch := func(ctx context.Context, obj map[string]any, opts metav1.PatchOptions) error {
		raw, err := json.Marshal(obj)
		if err != nil {
			return err
		}
		_, err = sched.CoreV1().Pods(teamA).Patch(ctx, pod.Name, types.StrategicMergePatchType, raw, opts)
		return err
	}
	annotations := func(kv map[string]any) map[string]any {
		return map[string]any{"metadata": map[string]any{"annotations": kv}}
	}
	dry := metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}}
	swapImage := map[string]any{"spec": map[string]any{"containers": []map[string]any{{"name": "main", "image": "registry.example.com/miner:latest"}}}}
	framework.WaitFor(t, "the scheduler's RBAC and pod policy to decide", func(ctx context.Context) (bool, string, error) {
		if err := patch(ctx, annotations(map[string]any{gpuv1.WaitDetailAnnotation: "probe"}), dry); err != nil {
			return false, err.Error(), nil
		}
		err := patch(ctx, swapImage, dry)
		return err != nil, fmt.Sprint(err), nil
	})

	// What the scheduler's code does: write and remove its two annotations.
	if err := patch(ctx, annotations(map[string]any{gpuv1.WaitDetailAnnotation: `{"reason":"NoCapacity"}`, gpuv1.AdviceAnnotation: "wait"}), metav1.PatchOptions{}); err != nil {
		t.Fatalf("the scheduler writes its wait annotations: %v", err)
	}
	if err := patch(ctx, annotations(map[string]any{gpuv1.WaitDetailAnnotation: nil, gpuv1.AdviceAnnotation: nil}), metav1.PatchOptions{}); err != nil {
		t.Fatalf("the scheduler removes its wait annotations: %v", err)
	}

	const denied = "rota-scheduler-pod-writes"
	l.hostile(t, "scheduler token swaps a pod's container image", func(ctx context.Context) error {
		return patch(ctx, swapImage, dry)
	}, denied, "may not change a pod's spec")
	l.hostile(t, "scheduler token relabels a pod", func(ctx context.Context) error {
		return patch(ctx, map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "inference"}}}, dry)
	}, denied, "may not change a pod's labels, owners or finalizers")
	l.hostile(t, "scheduler token gives a pod an owner", func(ctx context.Context) error {
		return patch(ctx, map[string]any{"metadata": map[string]any{"ownerReferences": []map[string]any{{
			"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "member", "uid": "d9607e19-f88f-11e6-a518-42010a800195",
		}}}}, dry)
	}, denied, "may not change a pod's labels, owners or finalizers")
	l.hostile(t, "scheduler token rewrites an annotation that is not its own", func(ctx context.Context) error {
		return patch(ctx, annotations(map[string]any{"team-a.example.com/owner": "mallory"}), dry)
	}, denied, "may change only the rota.dev/wait-detail, rota.dev/advice, rota.dev/reclaim, rota.dev/borrowed and rota.dev/checkpoint-requested annotations")
	l.hostile(t, "scheduler token removes an annotation that is not its own", func(ctx context.Context) error {
		return patch(ctx, annotations(map[string]any{"team-a.example.com/owner": nil}), dry)
	}, denied, "may change only the rota.dev/wait-detail, rota.dev/advice, rota.dev/reclaim, rota.dev/borrowed and rota.dev/checkpoint-requested annotations")
	l.hostile(t, "scheduler token writes another rota.dev annotation", func(ctx context.Context) error {
		return patch(ctx, annotations(map[string]any{gpuv1.TierAnnotation: "H100"}), dry)
	}, denied, "may change only the rota.dev/wait-detail, rota.dev/advice, rota.dev/reclaim, rota.dev/borrowed and rota.dev/checkpoint-requested annotations")

	// Leases: its own it creates and renews; the schedule controller's, in
	// the same namespace, it may not touch.
	leases := sched.CoordinationV1().Leases(paramsNS)
	own, err := leases.Create(ctx, lease(rotaScheduler, rotaScheduler+"-1"), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("the scheduler creates its lease: %v", err)
	}
	own.Spec.HolderIdentity = ptr.To(rotaScheduler + "-2")
	if _, err := leases.Update(ctx, own, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("the scheduler renews its lease: %v", err)
	}
	if _, err := e.cp.Client.CoordinationV1().Leases(paramsNS).Create(ctx, lease("rota-schedule-controller", "controller-0"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	l.hostile(t, "scheduler token takes the schedule controller's lease", func(ctx context.Context) error {
		other, err := e.cp.Client.CoordinationV1().Leases(paramsNS).Get(ctx, "rota-schedule-controller", metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("reading the controller's lease as admin: %w", err)
		}
		other.Spec.HolderIdentity = ptr.To(rotaScheduler + "-1")
		_, err = leases.Update(ctx, other, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}, "forbidden", `leases.coordination.k8s.io "rota-schedule-controller"`)
}

// lease is a Lease held by holder.
func lease(name, holder string) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: paramsNS},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To(int32(15))},
	}
}
