package waitreason

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/plugins/cyclestate"
	"github.com/rota-dev/rota/pkg/waits"
)

// Reserve implements fwk.ReservePlugin; WaitReason reserves nothing. It is
// a Reserve plugin for Unreserve, which the framework calls when a chosen
// placement is undone: a Reserve plugin refused the node, or the binding
// cycle failed (Permit, PreBind, Bind). PostFilter, which classifies
// failed attempts, runs for neither.
// It counts as a change for reused verdicts (reuse.go): the claims
// DynamicResources reserves in this cycle are allocated from now on.
func (pl *WaitReason) Reserve(context.Context, fwk.CycleState, *v1.Pod, string) *fwk.Status {
	pl.changes.Add(1)
	return nil
}

// Unreserve records why the pod still waits after its placement on node
// was undone: the refusal a Rota plugin recorded for that node (Quota's
// check of the real allocation, the Reservation budget), or BindingFailed
// when none did. It counts it in rota_admission_waits_total like any
// other failed attempt. A gang member's wait is the Gang plugin's.
func (pl *WaitReason) Unreserve(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, node string) {
	pl.changes.Add(1)
	if _, gang := pod.Labels[gpuv1.GangLabel]; gang {
		return
	}
	v := waits.Verdict{Reason: waits.BindingFailed, Message: fmt.Sprintf(
		"placed on node %s, but the placement was undone before binding; the pod's PodScheduled condition has the error, and the scheduler retries it", node)}
	if r, ok := cyclestate.LastRefusal(cs, node); ok {
		v = waits.Verdict{Reason: r.Reason, Message: r.Message}
	}
	pl.writer.Wait(pod, v)
	pl.waiting.waits(pod.UID, v)
	pl.metrics.waits.WithLabelValues(string(v.Reason), pod.Namespace).Inc()
	klog.FromContext(ctx).V(3).Info("Placement undone", "pod", klog.KObj(pod), "node", node, "reason", v.Reason, "message", v.Message)
}
