package defrag

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/rota-dev/rota/pkg/advisor"
)

// ApplyOptions say how Apply runs.
type ApplyOptions struct {
	// DryRun sends every eviction with dryRun=All: the API server checks
	// it (PodDisruptionBudgets included) and evicts nothing.
	DryRun bool
	// Namespace scopes the waiting pods re-planned after each step, as
	// the plan was made ("" for every namespace).
	Namespace string
	Advisor   advisor.Options
	// Timeout bounds the wait for an evicted workload's pods to go and
	// their claims to be released.
	Timeout time.Duration
	// Poll is how often that wait looks (0: one second).
	Poll  time.Duration
	Clock clock.PassiveClock
	// Out receives one line per step.
	Out io.Writer
}

// Surprise is why Apply stopped before the end of the plan.
type Surprise struct {
	// Step is the 1-based workload step Apply stopped at, of Steps.
	Step, Steps int
	Workload    string
	Reason      string
}

func (s *Surprise) Error() string {
	return fmt.Sprintf("stopped at step %d of %d (%s): %s", s.Step, s.Steps, s.Workload, s.Reason)
}

// step is one disturbed workload of the plan: its pods are evicted
// together.
type step struct {
	unit, workload, action, budget string
	evictions                      []Eviction
}

func (p *Plan) steps() []step {
	var out []step
	for _, e := range p.Evictions {
		if n := len(out); n > 0 && out[n-1].workload == e.Workload && out[n-1].unit == e.Unit {
			out[n-1].evictions = append(out[n-1].evictions, e)
			continue
		}
		out = append(out, step{unit: e.Unit, workload: e.Workload, action: e.Action, budget: e.Budget, evictions: []Eviction{e}})
	}
	return out
}

// Apply carries plan out through the Eviction API, one workload at a time.
// Before each step it checks that the step's pods are still the ones
// planned (same UID, same node, not terminating); it evicts them with the
// UID as a precondition; it waits until they are gone and their claims
// released; then it re-reads the cluster, plans again and checks that the
// new plan's evictions for the plan's units are the rest of this one. The
// first difference, or an eviction the API server refuses (429: a
// PodDisruptionBudget), stops it with a *Surprise. With DryRun it sends
// each step's evictions with dryRun=All and reports every step.
func Apply(ctx context.Context, client kubernetes.Interface, plan *Plan, o ApplyOptions) error {
	if o.Poll <= 0 {
		o.Poll = time.Second
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	logger := klog.FromContext(ctx)
	units := map[string]bool{}
	for _, u := range plan.Units {
		units[u.Workload] = true
	}
	steps := plan.steps()
	var refused []string
	for i, st := range steps {
		head := fmt.Sprintf("step %d/%d: evict %s for %s", i+1, len(steps), st.workload, st.unit)
		if pods := podsOf(st); len(pods) != 1 || pods[0] != st.workload {
			head = fmt.Sprintf("step %d/%d: evict %s (pods %s) for %s", i+1, len(steps), st.workload, strings.Join(pods, ", "), st.unit)
		}
		surprise := func(reason string) error {
			return &Surprise{Step: i + 1, Steps: len(steps), Workload: st.workload, Reason: reason}
		}
		if reason, err := checkPods(ctx, client, st); err != nil {
			return err
		} else if reason != "" {
			return surprise(reason)
		}
		claims, err := claimsOf(ctx, client, st)
		if err != nil {
			return err
		}
		refusedHere := ""
		for _, e := range st.evictions {
			err := evict(ctx, client, e, o.DryRun)
			if err == nil {
				continue
			}
			if !apierrors.IsTooManyRequests(err) {
				return fmt.Errorf("evict %s: %w", e.Pod, err)
			}
			refusedHere = refusal(e, err)
			break
		}
		switch {
		case refusedHere != "" && !o.DryRun:
			return surprise(refusedHere)
		case refusedHere != "":
			fmt.Fprintf(o.Out, "%s: would be refused: %s\n", head, refusedHere)
			refused = append(refused, fmt.Sprintf("%d (%s)", i+1, st.workload))
			continue
		case o.DryRun:
			fmt.Fprintf(o.Out, "%s: accepted by the API server (dry run, nothing evicted)\n", head)
			continue
		}
		fmt.Fprintf(o.Out, "%s: evicted\n", head)
		start := o.Clock.Now()
		if reason := waitGone(ctx, client, st, claims, o); reason != "" {
			return surprise(reason)
		}
		logger.V(2).Info("Evicted workload gone", "workload", st.workload, "took", o.Clock.Since(start))
		objs, err := Read(ctx, client)
		if err != nil {
			return err
		}
		next, err := Make(ctx, objs, o.Namespace, o.Advisor)
		if err != nil {
			return err
		}
		rest := &Plan{}
		for _, later := range steps[i+1:] {
			rest.Evictions = append(rest.Evictions, later.evictions...)
		}
		want, got := rest.signature(nil), next.signature(units)
		if !slices.Equal(want, got) {
			return surprise(fmt.Sprintf("the plan changed after this step: the rest was [%s], a new plan says [%s]",
				strings.Join(want, "; "), strings.Join(got, "; ")))
		}
		fmt.Fprintf(o.Out, "  %s gone after %s; re-planned: the rest of the plan holds (%d steps left)\n",
			st.workload, o.Clock.Since(start).Round(time.Second), len(steps)-i-1)
	}
	if len(refused) > 0 {
		return fmt.Errorf("dry run: the API server would refuse %d of %d steps (step %s, see above); nothing was evicted",
			len(refused), len(steps), strings.Join(refused, ", step "))
	}
	return nil
}

func podsOf(st step) []string {
	var out []string
	for _, e := range st.evictions {
		out = append(out, e.Pod)
	}
	return out
}

// checkPods says how a step's pods differ from the plan, or "".
func checkPods(ctx context.Context, client kubernetes.Interface, st step) (string, error) {
	for _, e := range st.evictions {
		ns, name, _ := strings.Cut(e.Pod, "/")
		p, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return fmt.Sprintf("planned pod %s is gone", e.Pod), nil
		case err != nil:
			return "", fmt.Errorf("get pod %s: %w", e.Pod, err)
		case e.UID == "" || p.UID != e.UID:
			return fmt.Sprintf("planned pod %s was replaced (UID %s, planned %s)", e.Pod, p.UID, e.UID), nil
		case p.Spec.NodeName != e.Node:
			return fmt.Sprintf("planned pod %s moved from %s to %s", e.Pod, e.Node, p.Spec.NodeName), nil
		case p.DeletionTimestamp != nil:
			return fmt.Sprintf("planned pod %s is already terminating", e.Pod), nil
		}
	}
	return "", nil
}

// evict sends one Eviction with the planned UID as a precondition, so a
// pod recreated under the same name is never evicted.
func evict(ctx context.Context, client kubernetes.Interface, e Eviction, dryRun bool) error {
	ns, name, _ := strings.Cut(e.Pod, "/")
	uid := e.UID
	del := &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}
	if dryRun {
		del.DryRun = []string{metav1.DryRunAll}
	}
	return client.PolicyV1().Evictions(ns).Evict(ctx, &policyv1.Eviction{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, DeleteOptions: del})
}

// refusal says why the API server refused an eviction, naming the budget.
func refusal(e Eviction, err error) string {
	msg := "the API server refused the eviction of " + e.Pod + " (429 TooManyRequests): " + err.Error()
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Details != nil {
		for _, c := range status.Status().Details.Causes {
			if c.Type == policyv1.DisruptionBudgetCause {
				msg += " — " + c.Message
			}
		}
	}
	if e.Budget != "" {
		msg += " (planned with " + e.Budget + ")"
	}
	return msg
}

// claimsOf lists the claims the step's pods use, "namespace/name".
func claimsOf(ctx context.Context, client kubernetes.Interface, st step) ([]string, error) {
	var out []string
	for _, e := range st.evictions {
		ns, name, _ := strings.Cut(e.Pod, "/")
		p, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("get pod %s: %w", e.Pod, err)
		}
		for _, c := range podClaims(p) {
			out = append(out, ns+"/"+c)
		}
	}
	return out, nil
}

func podClaims(p *v1.Pod) []string {
	var out []string
	for _, rc := range p.Spec.ResourceClaims {
		if rc.ResourceClaimName != nil {
			out = append(out, *rc.ResourceClaimName)
		}
	}
	for _, s := range p.Status.ResourceClaimStatuses {
		if s.ResourceClaimName != nil {
			out = append(out, *s.ResourceClaimName)
		}
	}
	return out
}

// waitGone waits until the step's pods are gone (or replaced under their
// name) and none of their claims is still allocated, and says why not
// when the timeout ends first.
func waitGone(ctx context.Context, client kubernetes.Interface, st step, claims []string, o ApplyOptions) string {
	last := ""
	err := wait.PollUntilContextTimeout(ctx, o.Poll, o.Timeout, true, func(ctx context.Context) (bool, error) {
		for _, e := range st.evictions {
			ns, name, _ := strings.Cut(e.Pod, "/")
			p, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err == nil && p.UID == e.UID {
				last = "pod " + e.Pod + " is still there"
				if p.DeletionTimestamp != nil {
					last += " (terminating)"
				}
				return false, nil
			}
			if err != nil && !apierrors.IsNotFound(err) {
				return false, err
			}
		}
		for _, ck := range claims {
			ns, name, _ := strings.Cut(ck, "/")
			c, err := client.ResourceV1().ResourceClaims(ns).Get(ctx, name, metav1.GetOptions{})
			if err == nil && c.Status.Allocation != nil {
				last = "claim " + ck + " is still allocated"
				return false, nil
			}
			if err != nil && !apierrors.IsNotFound(err) {
				return false, err
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Sprintf("evicted, but not gone after %s: %s (%v)", o.Timeout, last, err)
	}
	return ""
}
