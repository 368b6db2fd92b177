package schedule

import (
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/schedule/controller"
)

// qwen32b serves an alias and business hours stop it without consent: at
// 08:00 the whole transition is refused before anything is released. The
// alias annotation is refused the same way. Consent plus apply-now, as the
// fix text says, lets the swap run within the same interval.
// (An error while checking aliases is TestLeastPrivilegeRBAC's last step.)
func TestAliasBlockedWithoutConsent(t *testing.T) {
	e, obs := nightWorkloads(t, at(19, 7, 0), nightOptions{})
	e.createSchedule(readExample(t, "deployschedule-week.yaml"))
	if _, err := e.cp.Client.CoreV1().Services(ns).Create(e.ctx, &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "batch-api"},
		Spec:       v1.ServiceSpec{Selector: map[string]string{"app": "md-qwen32b"}, Ports: []v1.ServicePort{{Port: 80}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	qwenPods := e.podNames("md-qwen32b")
	e.startController(nil)
	e.convergedSince(weekName, at(19, 7, 0), 50)

	e.clock.SetTime(at(19, 8, 0))
	qwen := e.waitReason(weekName, "qwen32b", v1alpha1.TargetPhaseFailed, controller.ReasonAliasBlocked, 50)
	expectTerminal(t, qwen, v1alpha1.TargetPhaseFailed, controller.ReasonAliasBlocked,
		"Deployment md-qwen32b serves Service batch-api and the intent (window business-hours) does not allow downtime, so it keeps running",
		"Fix: Set allowDowntime: true on the window state")
	llama := e.targetStatus(weekName, "llama70b")
	expectTerminal(t, llama, v1alpha1.TargetPhaseFailed, controller.ReasonTransitionAborted,
		"nothing was released: target qwen32b failed its preflight (AliasBlocked)")
	e.waitEvent(weekName, v1.EventTypeWarning, controller.ReasonAliasBlocked, "target qwen32b: Failed", "Service batch-api")
	e.waitEvent(weekName, v1.EventTypeWarning, controller.ReasonTransitionAborted, "target llama70b: Failed")

	// A minute of passes later nothing has been released or retried.
	e.tick(12)
	if st := e.targetStatus(weekName, "qwen32b"); st.Reason != controller.ReasonAliasBlocked {
		t.Errorf("qwen32b after a minute: %s", describe(st))
	}
	e.expectUntouched(obs, "md-qwen32b", "md-llama70b", "md-bge-embed")
	if got := e.podNames("md-qwen32b"); len(got) != 1 || got[0] != qwenPods[0] {
		t.Errorf("qwen32b pods %v, want the one it had (%v)", got, qwenPods)
	}

	// The alias annotation alone blocks the stop as well.
	if err := e.cp.Client.CoreV1().Services(ns).Delete(e.ctx, "batch-api", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"true"}}}`, gpuv1.AliasAnnotation)
	if _, err := e.cp.Client.AppsV1().Deployments(ns).Patch(e.ctx, "md-qwen32b", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	e.applyNow(weekName, "retry-1")
	qwen = e.waitTarget(weekName, "qwen32b", "blocked by the alias annotation", 50, func(st v1alpha1.TargetStatus) bool {
		return st.Reason == controller.ReasonAliasBlocked && strings.Contains(st.Message, "the alias annotation")
	})
	expectTerminal(t, qwen, v1alpha1.TargetPhaseFailed, controller.ReasonAliasBlocked,
		"Deployment md-qwen32b serves the alias annotation rota.dev/alias and the intent (window business-hours) does not allow downtime")
	if len(qwen.Steps) != 1 || !strings.HasSuffix(qwen.Steps[0].Key, "/stop#retry-1") {
		t.Errorf("qwen32b steps after apply-now: %s, want one stop keyed #retry-1", describeSteps(qwen.Steps))
	}
	e.tick(6)
	e.expectUntouched(obs, "md-qwen32b", "md-llama70b")

	// Consent, then apply-now: the swap runs in the same interval.
	e.updateSchedule(weekName, func(ds *v1alpha1.DeploySchedule) {
		stateOf(t, ds, "business-hours", "qwen32b").AllowDowntime = ptr.To(true)
	})
	e.applyNow(weekName, "retry-2")
	e.convergedSince(weekName, e.clock.Now(), 400)
	if q, l := e.replicas("md-qwen32b"), e.replicas("md-llama70b"); q != 0 || l != 1 {
		t.Errorf("after consent: qwen32b %d llama70b %d replicas, want 0 and 1", q, l)
	}
	if key := e.deployment("md-qwen32b").Annotations[gpuv1.TransitionKeyAnnotation]; !strings.HasSuffix(key, "/stop#retry-2") {
		t.Errorf("qwen32b was stopped by step %q, want the retry-2 stop", key)
	}
}
