package controller

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// stubBudget answers every request the same way.
type stubBudget struct {
	d   BudgetDecision
	err error
}

func (s stubBudget) CheckBudget(context.Context, BudgetRequest) (BudgetDecision, error) {
	return s.d, s.err
}

// TestCheckBudget: no hook means no check; a refusal carries the hook's
// message; an error or a hook that answers garbage or non-200 refuses
// (fail closed).
func TestCheckBudget(t *testing.T) {
	step := &v1alpha1.TransitionStep{Replicas: ptr.To[int32](1), Group: v1alpha1.StepGroupAcquire}
	acquire := []planned{{t: &target{spec: v1alpha1.ScheduleTarget{Name: "llama"}}, s: step}}
	serve := func(status int, body string) BudgetChecker {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(status)
			_, _ = w.Write([]byte(body))
		}))
		t.Cleanup(srv.Close)
		return WebhookBudget{URL: srv.URL}
	}
	cases := map[string]struct {
		hook BudgetChecker
		want string // "" = allowed
	}{
		"off":                  {hook: nil},
		"allowed":              {hook: stubBudget{d: BudgetDecision{Allowed: true}}},
		"refused with message": {hook: stubBudget{d: BudgetDecision{Message: "over budget"}}, want: "the budget hook refused the transition: over budget"},
		"refused silently":     {hook: stubBudget{}, want: "refused without a message"},
		"error":                {hook: stubBudget{err: errors.New("down")}, want: "could not ask the budget hook (failing closed): down"},
		"webhook allows":       {hook: serve(http.StatusOK, `{"allowed":true}`)},
		"webhook refuses":      {hook: serve(http.StatusOK, `{"allowed":false,"message":"no"}`), want: "refused the transition: no"},
		"webhook 500":          {hook: serve(http.StatusInternalServerError, "boom"), want: "failing closed): budget webhook http://"},
		"webhook garbage":      {hook: serve(http.StatusOK, "<html>"), want: "decode answer"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := preflight{namespace: "serving", schedule: "s", budget: tc.hook}
			if name != "off" && tc.hook == nil {
				t.Fatal("bad case")
			}
			_, msg := f.checkBudget(context.Background(), acquire, nil)
			if (tc.want == "") != (msg == "") || !strings.Contains(msg, tc.want) {
				t.Errorf("checkBudget = %q, want %q", msg, tc.want)
			}
		})
	}
}
