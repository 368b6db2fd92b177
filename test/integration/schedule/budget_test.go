package schedule

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/schedule/controller"
)

// budgetHook is a cluster admin's budget webhook: it records every
// request and allows or refuses as told.
type budgetHook struct {
	mu       sync.Mutex
	allow    bool
	requests []controller.BudgetRequest
}

func (h *budgetHook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req controller.BudgetRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	h.mu.Lock()
	h.requests = append(h.requests, req)
	d := controller.BudgetDecision{Allowed: h.allow}
	if !h.allow {
		d.Message = "team serving has 4 GPU-hours left this week; llama70b's 8 GPUs for 10 h need 80"
	}
	h.mu.Unlock()
	_ = json.NewEncoder(w).Encode(d)
}

func (h *budgetHook) set(allow bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.allow = allow
}

func (h *budgetHook) seen() []controller.BudgetRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]controller.BudgetRequest{}, h.requests...)
}

// The budget hook (a webhook over real HTTP) refuses the 08:00 swap: the
// preflight fails it with BudgetRefused before anything is released, so
// qwen32b keeps serving; the hook was told what llama70b would add. Once the
// hook allows it, apply-now runs the swap in the same interval.
func TestBudgetRefusedReleasesNothing(t *testing.T) {
	e, obs := nightWorkloads(t, at(19, 7, 0), nightOptions{})
	hook := &budgetHook{}
	srv := httptest.NewServer(hook)
	t.Cleanup(srv.Close)
	e.budget = controller.WebhookBudget{URL: srv.URL}
	qwenPods := e.podNames("md-qwen32b")
	e.createSchedule(readExample(t, "deployschedule-week.yaml"))
	e.startController(nil)
	e.convergedSince(weekName, at(19, 7, 0), 50)
	if n := len(hook.seen()); n != 0 {
		t.Errorf("the hook was asked %d times before any transition", n)
	}

	e.clock.SetTime(at(19, 8, 0))
	llama := e.waitReason(weekName, "llama70b", v1alpha1.TargetPhaseFailed, controller.ReasonBudgetRefused, 50)
	expectTerminal(t, llama, v1alpha1.TargetPhaseFailed, controller.ReasonBudgetRefused,
		"the budget hook refused the transition: team serving has 4 GPU-hours left this week", "Nothing was released")
	qwen := e.targetStatus(weekName, "qwen32b")
	expectTerminal(t, qwen, v1alpha1.TargetPhaseFailed, controller.ReasonTransitionAborted,
		"nothing was released: target llama70b failed its preflight (BudgetRefused)")
	if len(qwen.Steps) != 1 || qwen.Steps[0].SubmittedAt != nil {
		t.Errorf("qwen32b's stop was submitted: %s", describeSteps(qwen.Steps))
	}
	e.waitEvent(weekName, v1.EventTypeWarning, controller.ReasonBudgetRefused, "target llama70b: Failed")
	reqs := hook.seen()
	if len(reqs) == 0 {
		t.Fatal("the hook was never asked")
	}
	got := reqs[0]
	if got.Namespace != ns || got.Schedule != weekName || !got.IntervalStart.Equal(at(19, 8, 0)) || len(got.Targets) != 1 {
		t.Fatalf("budget request %+v, want schedule %s/%s, interval 08:00, one target", got, ns, weekName)
	}
	if tg := got.Targets[0]; tg.Name != "llama70b" || tg.Workload != "Deployment/md-llama70b" || tg.AddedReplicas != 1 ||
		tg.AddedPods != 1 || tg.AddedDevices[gpuv1.DeviceClassName] != 8 {
		t.Errorf("budget request target %+v, want llama70b adding 1 pod with 8 %s devices", tg, gpuv1.DeviceClassName)
	}
	e.tick(12)
	e.expectUntouched(obs, "md-qwen32b", "md-llama70b", "md-bge-embed")
	if got := e.podNames("md-qwen32b"); len(got) != 1 || got[0] != qwenPods[0] {
		t.Errorf("qwen32b pods %v, want the one it had (%v)", got, qwenPods)
	}

	// The budget's owner allows it; apply-now runs the swap.
	hook.set(true)
	e.applyNow(weekName, "budget-raised")
	e.convergedSince(weekName, e.clock.Now(), 400)
	if q, l := e.replicas("md-qwen32b"), e.replicas("md-llama70b"); q != 0 || l != 1 {
		t.Errorf("after the budget allowed it: qwen32b %d llama70b %d replicas, want 0 and 1", q, l)
	}
	if key := e.deployment("md-llama70b").Annotations[gpuv1.TransitionKeyAnnotation]; !strings.HasSuffix(key, "#budget-raised") {
		t.Errorf("llama70b was started by step %q, want the budget-raised retry", key)
	}
}
