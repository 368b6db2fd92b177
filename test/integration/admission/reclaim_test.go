package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/gpuquota"
	"github.com/rota-dev/rota/pkg/waits"
	"github.com/rota-dev/rota/test/integration/framework"
)

// createGPUQuota creates a GPUQuota guaranteeing guaranteed GPUs of model
// to namespace.
func createGPUQuota(t *testing.T, cp *framework.ControlPlane, namespace, model string, guaranteed int32) {
	t.Helper()
	u, err := gpuquota.ToUnstructured(&rotav1.GPUQuota{
		ObjectMeta: metav1.ObjectMeta{Name: namespace},
		Spec:       rotav1.GPUQuotaSpec{Models: []rotav1.ModelQuota{{Model: model, Guaranteed: guaranteed}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Dynamic.Resource(rotav1.GPUQuotasResource).Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create GPUQuota %s: %v", namespace, err)
	}
}

// twoGPUTemplate asks for two H100s.
func twoGPUTemplate(namespace string) any {
	tmpl := framework.TieredClaimTemplate(namespace, "two-h100", framework.ModelTier("H100"))
	tmpl.Spec.Spec.Devices.Requests[0].FirstAvailable[0].Count = 2
	return tmpl
}

// actAsKubeletAndWorkload stands in for what no process does here: it
// finishes the deletion of team-b's evicted pods (a kubelet would, once
// their containers stop), and acknowledges a checkpoint request the way a
// workload that declared one does, by copying the request's time into
// rota.dev/checkpointed.
func actAsKubeletAndWorkload(t *testing.T, cp *framework.ControlPlane, namespace string) (acked func() []string) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	var mu sync.Mutex
	var acks []string
	go func() {
		for ctx.Err() == nil {
			pods, err := cp.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
			if err == nil {
				for _, p := range pods.Items {
					if p.DeletionTimestamp != nil {
						_ = cp.Client.CoreV1().Pods(namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
						continue
					}
					req, asked := p.Annotations[gpuv1.CheckpointRequestedAnnotation]
					if asked && p.Annotations[gpuv1.CheckpointedAnnotation] != req {
						patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, gpuv1.CheckpointedAnnotation, req)
						if _, err := cp.Client.CoreV1().Pods(namespace).Patch(ctx, p.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err == nil {
							mu.Lock()
							acks = append(acks, p.Name)
							mu.Unlock()
						}
					}
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), acks...)
	}
}

// TestReclaimForGuarantee is the scenario of docs/admission.md: team-a is
// guaranteed 8 H100 and idle; team-b (guaranteed 8) borrows the other 8 of
// the pool's 16. team-a's 4-GPU gang is placed whole after the newest two
// of team-b's borrowers, one declaring a checkpoint and one not, are asked
// to checkpoint and evicted; team-b keeps everything within its guarantee.
func TestReclaimForGuarantee(t *testing.T) {
	cp := framework.StartControlPlane(t)
	cp.StartClaimController(t)
	cp.Create(t,
		framework.Namespace("team-a"), framework.Namespace("team-b"), framework.DeviceClass(),
		framework.Node("n1"), framework.GPUSlice("n1", framework.GPUs(framework.H100, 8)...),
		framework.Node("n2"), framework.GPUSlice("n2", framework.GPUs(framework.H100, 8)...),
	)
	createGPUQuota(t, cp, "team-a", "H100", 8)
	createGPUQuota(t, cp, "team-b", "H100", 8)
	cp.StartScheduler(t)
	cp.Create(t, twoGPUTemplate("team-a"), twoGPUTemplate("team-b"))

	for i := range 8 {
		pod := framework.GPUPod("team-b", fmt.Sprintf("b-%d", i), sched, "two-h100")
		if i == 7 {
			pod.Annotations = map[string]string{gpuv1.CheckpointAnnotation: "grace=60s"}
		}
		cp.Create(t, pod)
		bound := cp.WaitForPodBound(t, "team-b", pod.Name)
		mark, marked := bound.Annotations[gpuv1.BorrowedAnnotation]
		switch {
		case i < 4 && marked:
			t.Fatalf("%s marked %q: team-b's first 8 GPUs are within its guarantee", pod.Name, mark)
		case i >= 4 && mark != "H100=2":
			t.Fatalf("%s borrower mark %q, want H100=2: team-b holds %d of its 8 guaranteed", pod.Name, mark, 2*i)
		}
	}
	acked := actAsKubeletAndWorkload(t, cp, "team-b")

	for i := range 2 {
		g := framework.GPUPod("team-a", fmt.Sprintf("train-%d", i), sched, "two-h100")
		g.Labels = map[string]string{gpuv1.GangLabel: "train"}
		g.Annotations = map[string]string{gpuv1.GangSizeAnnotation: "2"}
		cp.Create(t, g)
	}
	for i := range 2 {
		p := cp.WaitForPodBound(t, "team-a", fmt.Sprintf("train-%d", i))
		if _, marked := p.Annotations[gpuv1.BorrowedAnnotation]; marked {
			t.Errorf("%s is marked a borrower; it is within team-a's guarantee", p.Name)
		}
	}

	for i := range 8 {
		name := fmt.Sprintf("b-%d", i)
		_, err := cp.Client.CoreV1().Pods("team-b").Get(context.Background(), name, metav1.GetOptions{})
		gone := apierrors.IsNotFound(err)
		if want := i >= 6; gone != want {
			t.Errorf("%s gone = %v, want %v: the reclaim takes team-b's two newest borrowers and nothing within its guarantee", name, gone, want)
		}
	}
	if got := acked(); len(got) != 1 || got[0] != "b-7" {
		t.Errorf("checkpoint acknowledgements %v, want [b-7]: only b-7 declared one", got)
	}
	b7 := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "b-7"}}
	b6 := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "b-6"}}
	checkpoint := cp.PodEventNotes(t, b7, gpuv1.CheckpointEventReason)
	if len(checkpoint) == 0 || !strings.Contains(strings.Join(checkpoint, "\n"), "acknowledged") {
		t.Errorf("b-7 Checkpoint events %q, want an acknowledgement", checkpoint)
	}
	if notes := cp.PodEventNotes(t, b6, gpuv1.CheckpointEventReason); len(notes) > 0 && strings.Contains(strings.Join(notes, "\n"), "acknowledged") {
		t.Errorf("b-6 declared no checkpoint, yet: %q", notes)
	}
	for _, p := range []*v1.Pod{b6, b7} {
		notes := strings.Join(cp.PodEventNotes(t, p, gpuv1.ReclaimEventReason), "\n")
		for _, want := range []string{"team-a", "8 guaranteed", "team-b holds 16"} {
			if !strings.Contains(notes, want) {
				t.Errorf("%s Reclaimed events %q lack %q", p.Name, notes, want)
			}
		}
	}
	reclaiming := cp.PodEventNotes(t, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "train-0"}}, gpuv1.ReclaimingEventReason)
	reclaiming = append(reclaiming, cp.PodEventNotes(t, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "train-1"}}, gpuv1.ReclaimingEventReason)...)
	if joined := strings.Join(reclaiming, "\n"); !strings.Contains(joined, "reclaiming 4 H100 for team-a's guarantee") || !strings.Contains(joined, "team-b/b-7") {
		t.Errorf("the gang's Reclaiming events %q do not say what is reclaimed from whom", reclaiming)
	}
	// What `kubectl rota why` reads while the gang waits: the reclaim with
	// its victims, and the checkpoint grace of the one that declared it.
	var detail waits.ReclaimDetail
	framework.WaitFor(t, "the reclaim detail on train-0", func(ctx context.Context) (bool, string, error) {
		p, err := cp.Client.CoreV1().Pods("team-a").Get(ctx, "train-0", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		raw, ok := p.Annotations[gpuv1.ReclaimAnnotation]
		if !ok {
			return false, "no annotation yet", nil
		}
		return true, raw, json.Unmarshal([]byte(raw), &detail)
	})
	graced := map[string]bool{}
	for _, v := range detail.Victims {
		graced[v.Workload] = v.GraceUntil != nil
	}
	if want := map[string]bool{"team-b/b-6": false, "team-b/b-7": true}; !maps.Equal(graced, want) || detail.Need != 4 || detail.Guaranteed != 8 {
		t.Errorf("reclaim detail %+v: want victims b-6 (no checkpoint) and b-7 (grace), need 4 of 8 guaranteed", detail)
	}
	held := cp.AllocatedDevices(t)
	t.Logf("allocated after the reclaim: %v", held)
}

// TestLendingLimitKeepsIdleGuaranteeFree: team-a is guaranteed all 4 H100
// but lends only 2 of them while idle. team-c, without a GPUQuota, borrows
// 2; its third pod waits QuotaExceeded naming the idle guarantee team-a
// does not lend; team-a's own pods still start at once.
func TestLendingLimitKeepsIdleGuaranteeFree(t *testing.T) {
	cp := framework.StartControlPlane(t)
	cp.StartClaimController(t)
	cp.Create(t,
		framework.Namespace("team-a"), framework.Namespace("team-c"), framework.DeviceClass(),
		framework.Node("n1"), framework.GPUSlice("n1", framework.GPUs(framework.H100, 4)...),
	)
	u, err := gpuquota.ToUnstructured(&rotav1.GPUQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "team-a"},
		Spec:       rotav1.GPUQuotaSpec{Models: []rotav1.ModelQuota{{Model: "H100", Guaranteed: 4, LendingLimit: ptr.To[int32](2)}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Dynamic.Resource(rotav1.GPUQuotasResource).Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cp.StartScheduler(t)
	h100 := framework.ModelTier("H100")
	cp.Create(t, framework.TieredClaimTemplate("team-a", "h100", h100), framework.TieredClaimTemplate("team-c", "h100", h100))
	for i := range 2 {
		cp.Create(t, framework.GPUPod("team-c", fmt.Sprintf("c-%d", i), sched, "h100"))
		if mark := cp.WaitForPodBound(t, "team-c", fmt.Sprintf("c-%d", i)).Annotations[gpuv1.BorrowedAnnotation]; mark != "H100=1" {
			t.Errorf("c-%d borrower mark %q, want H100=1: team-c has no guarantee", i, mark)
		}
	}
	cp.Create(t, framework.GPUPod("team-c", "c-2", sched, "h100"))
	msg := cp.WaitForWaiting(t, "team-c", "c-2", "QuotaExceeded", "idle guarantees other tenants do not lend")
	t.Logf("c-2: %s", msg)
	for i := range 2 {
		cp.Create(t, framework.GPUPod("team-a", fmt.Sprintf("a-%d", i), sched, "h100"))
		cp.WaitForPodBound(t, "team-a", fmt.Sprintf("a-%d", i))
	}
}

// TestPreemptionStaysWithinTenant: with Reclaim in place of
// DefaultPreemption, priority still preempts, but only inside a tenant.
// One H100: team-a's low-priority pod holds it; team-b's high-priority pod
// waits (no guarantee covers it, and another tenant's pod is taken only
// by a reclaim); team-a's own high-priority pod preempts it.
func TestPreemptionStaysWithinTenant(t *testing.T) {
	cp := framework.StartControlPlane(t)
	cp.StartClaimController(t)
	cp.Create(t,
		framework.Namespace("team-a"), framework.Namespace("team-b"), framework.DeviceClass(),
		framework.Node("n1"), framework.GPUSlice("n1", framework.GPUs(framework.H100, 1)...),
	)
	for name, value := range map[string]int32{"low": 100, "high": 1000} {
		pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}
		if _, err := cp.Client.SchedulingV1().PriorityClasses().Create(context.Background(), pc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cp.StartScheduler(t)
	h100 := framework.ModelTier("H100")
	cp.Create(t, framework.TieredClaimTemplate("team-a", "h100", h100), framework.TieredClaimTemplate("team-b", "h100", h100))
	withPriority := func(p *v1.Pod, class string) *v1.Pod {
		p.Spec.PriorityClassName = class
		return p
	}
	cp.Create(t, withPriority(framework.GPUPod("team-a", "a-low", sched, "h100"), "low"))
	cp.WaitForPodBound(t, "team-a", "a-low")
	actAsKubeletAndWorkload(t, cp, "team-a")

	cp.Create(t, withPriority(framework.GPUPod("team-b", "b-high", sched, "h100"), "high"))
	cp.WaitForPodUnschedulable(t, "team-b", "b-high")
	if p, err := cp.Client.CoreV1().Pods("team-a").Get(context.Background(), "a-low", metav1.GetOptions{}); err != nil || p.DeletionTimestamp != nil {
		t.Fatalf("team-b's pod preempted team-a's: %v", err)
	}
	cp.DeletePodNow(t, "team-b", "b-high")

	cp.Create(t, withPriority(framework.GPUPod("team-a", "a-high", sched, "h100"), "high"))
	if node := cp.WaitForPodBound(t, "team-a", "a-high").Spec.NodeName; node != "n1" {
		t.Fatalf("a-high on %q", node)
	}
	if _, err := cp.Client.CoreV1().Pods("team-a").Get(context.Background(), "a-low", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a-low still there (%v): team-a's high-priority pod should have preempted it", err)
	}
}

// TestGPUQuotaChangesWithoutRestart: the scheduler follows a GPUQuota as
// the cluster admin edits it. team-a may hold 1 H100 (guaranteed 0,
// borrowing limit 1): its second pod waits QuotaExceeded; raising the
// borrowing limit to 2 places it, without a scheduler restart.
func TestGPUQuotaChangesWithoutRestart(t *testing.T) {
	cp := framework.StartControlPlane(t)
	cp.StartClaimController(t)
	cp.Create(t,
		framework.Namespace("team-a"), framework.DeviceClass(),
		framework.Node("n1"), framework.GPUSlice("n1", framework.GPUs(framework.H100, 4)...),
	)
	q := &rotav1.GPUQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "team-a"},
		Spec:       rotav1.GPUQuotaSpec{Models: []rotav1.ModelQuota{{Model: "H100", Guaranteed: 0, BorrowingLimit: ptr.To[int32](1)}}},
	}
	u, err := gpuquota.ToUnstructured(q)
	if err != nil {
		t.Fatal(err)
	}
	quotas := cp.Dynamic.Resource(rotav1.GPUQuotasResource)
	if _, err := quotas.Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cp.StartScheduler(t)
	cp.Create(t, framework.TieredClaimTemplate("team-a", "h100", framework.ModelTier("H100")))
	cp.Create(t, framework.GPUPod("team-a", "a-0", sched, "h100"))
	cp.WaitForPodBound(t, "team-a", "a-0")
	cp.Create(t, framework.GPUPod("team-a", "a-1", sched, "h100"))
	cp.WaitForWaiting(t, "team-a", "a-1", "QuotaExceeded", "team-a holds 1 of 1 H100")

	patch := []byte(`{"spec":{"models":[{"model":"H100","guaranteed":0,"borrowingLimit":2}]}}`)
	if _, err := quotas.Patch(context.Background(), "team-a", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	cp.WaitForPodBound(t, "team-a", "a-1")
}
