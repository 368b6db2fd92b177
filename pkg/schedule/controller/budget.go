package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
)

// BudgetChecker is the budget hook of a transition's preflight
// (docs/schedule.md, "Budget hook"): a cluster admin's spending rule, asked
// once per transition, after the quota check and before anything is
// released, about what the transition's acquire steps add. Off when
// Options.Budget is nil (the default). A refusal, or an error (the hook
// fails closed), fails every step of the transition with BudgetRefused.
type BudgetChecker interface {
	CheckBudget(ctx context.Context, req BudgetRequest) (BudgetDecision, error)
}

// BudgetRequest is what a transition would add. It is also the JSON body
// WebhookBudget posts.
type BudgetRequest struct {
	// Namespace and Schedule name the DeploySchedule (the tenant is the
	// namespace).
	Namespace string `json:"namespace"`
	Schedule  string `json:"schedule"`
	// IntervalStart is the start of the intent interval the transition is for.
	IntervalStart time.Time `json:"intervalStart"`
	// Targets are the targets the transition starts or scales up.
	Targets []BudgetTarget `json:"targets"`
}

// BudgetTarget is one acquire step.
type BudgetTarget struct {
	Name string `json:"name"`
	// Workload is "<kind>/<name>".
	Workload string `json:"workload"`
	// Replicas is the scale the step sets; AddedReplicas and AddedPods how
	// many it adds.
	Replicas      int32 `json:"replicas"`
	AddedReplicas int64 `json:"addedReplicas"`
	AddedPods     int64 `json:"addedPods"`
	// AddedDevices are the devices the added pods ask for, per DeviceClass
	// (the worst case of a firstAvailable list, as ResourceQuota counts).
	AddedDevices map[string]int64 `json:"addedDevices"`
}

// BudgetDecision is the hook's answer; Message is shown to the user.
type BudgetDecision struct {
	Allowed bool   `json:"allowed"`
	Message string `json:"message,omitempty"`
}

// budgetRequest builds the request for the acquire steps.
func budgetRequest(namespace, schedule string, acquire []planned, perReplica map[string]v1.ResourceList) BudgetRequest {
	req := BudgetRequest{Namespace: namespace, Schedule: schedule, Targets: []BudgetTarget{}}
	for _, pl := range acquire {
		if req.IntervalStart.IsZero() {
			req.IntervalStart = pl.t.interval.Start
		}
		bt := BudgetTarget{Name: pl.t.spec.Name, Workload: pl.t.spec.WorkloadRef.Kind + "/" + pl.t.spec.WorkloadRef.Name,
			Replicas: replicasOf(pl.s), AddedReplicas: delta(pl), AddedPods: podDelta(pl), AddedDevices: map[string]int64{}}
		for name, q := range perReplica[pl.t.spec.Name] {
			bt.AddedDevices[strings.TrimSuffix(string(name), quotaSuffix)] = q.Value() * delta(pl)
		}
		req.Targets = append(req.Targets, bt)
	}
	sort.Slice(req.Targets, func(i, j int) bool { return req.Targets[i].Name < req.Targets[j].Name })
	return req
}

// WebhookBudget is the BudgetChecker `schedule-controller run
// --budget-webhook-url` configures: it posts the BudgetRequest as JSON and
// reads a BudgetDecision back. Anything but HTTP 200 with a decision is an
// error, and the transition is refused (fail closed).
type WebhookBudget struct {
	URL    string
	Client *http.Client
}

// CheckBudget implements BudgetChecker.
func (w WebhookBudget) CheckBudget(ctx context.Context, req BudgetRequest) (BudgetDecision, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return BudgetDecision{}, fmt.Errorf("encode budget request: %w", err)
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL, bytes.NewReader(body))
	if err != nil {
		return BudgetDecision{}, fmt.Errorf("budget webhook %s: %w", w.URL, err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	client := w.Client
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	resp, err := client.Do(hreq)
	if err != nil {
		return BudgetDecision{}, fmt.Errorf("budget webhook %s: %w", w.URL, err)
	}
	defer resp.Body.Close() //nolint:errcheck // read-only body
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return BudgetDecision{}, fmt.Errorf("budget webhook %s: read answer: %w", w.URL, err)
	}
	if resp.StatusCode != http.StatusOK {
		return BudgetDecision{}, fmt.Errorf("budget webhook %s: HTTP %d: %s", w.URL, resp.StatusCode, truncate(string(data), 256))
	}
	var d BudgetDecision
	if err := json.Unmarshal(data, &d); err != nil {
		return BudgetDecision{}, fmt.Errorf("budget webhook %s: decode answer: %w", w.URL, err)
	}
	return d, nil
}

// checkBudget asks the hook, if one is configured. It returns the acquire
// step to blame and the refusal message ("" when allowed).
func (f preflight) checkBudget(ctx context.Context, acquire []planned, perReplica map[string]v1.ResourceList) (planned, string) {
	if f.budget == nil || len(acquire) == 0 {
		return planned{}, ""
	}
	req := budgetRequest(f.namespace, f.schedule, acquire, perReplica)
	d, err := f.budget.CheckBudget(ctx, req)
	switch {
	case err != nil:
		return acquire[0], "could not ask the budget hook (failing closed): " + err.Error()
	case !d.Allowed:
		msg := d.Message
		if msg == "" {
			msg = "refused without a message"
		}
		return acquire[0], "the budget hook refused the transition: " + truncate(msg, 512)
	}
	return planned{}, ""
}
