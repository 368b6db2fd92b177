package forecast

import (
	"fmt"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/labels"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/schedule"
)

// Reasons of a warning: what the controller will answer at the transition.
const (
	// WarningAliasBlocked: a stop of a target that serves an alias, in an
	// interval that does not allow downtime; the target keeps running.
	WarningAliasBlocked = "AliasBlocked"
	// WarningQuotaRefused: an acquire step would take the namespace over a
	// ResourceQuota on DRA devices; nothing of the transition is released.
	WarningQuotaRefused = "QuotaRefused"
)

// Warning is a refusal the controller will make at a transition.
type Warning struct {
	Reason   string
	Schedule string
	Target   string
	At       time.Time
	Message  string
}

// aliasOf names what makes w serve an alias (the rota.dev/alias annotation,
// or a Service of its namespace selecting its pods), "" if nothing.
func aliasOf(w *Workload, services []*v1.Service) string {
	if w.Annotations[gpuv1.AliasAnnotation] == "true" {
		return "the alias annotation " + gpuv1.AliasAnnotation
	}
	for _, svc := range services {
		if svc.Namespace != w.Namespace || len(svc.Spec.Selector) == 0 || w.Template == nil {
			continue
		}
		if labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(w.Template.Labels)) {
			return "Service " + svc.Name
		}
	}
	return ""
}

// stepWarnings checks one transition's steps as the controller's preflight
// and release will: the alias guard on each stop, and each acquire step's
// namespace quota once the steps before it ran. before is the running set
// before the transition.
func (r *run) stepWarnings(s *Schedule, tr schedule.Transition, before map[string]int32, intents map[string]schedule.Intent) {
	cur := map[string]int32{}
	for k, v := range before {
		cur[k] = v
	}
	for _, st := range tr.Steps {
		l := s.Targets[st.Target]
		if l == nil {
			continue
		}
		if st.Action == schedule.ActionStop && l.Alias != "" && !intents[st.Target].AllowDowntime {
			r.out.Warnings = append(r.out.Warnings, Warning{Reason: WarningAliasBlocked, Schedule: s.Key(), Target: st.Target, At: tr.At,
				Message: fmt.Sprintf("target %s serves %s and the interval from %s (window %s) does not allow downtime: it keeps running",
					st.Target, l.Alias, tr.At.Format(time.RFC3339), intents[st.Target].Source)})
		}
		prev := cur[l.Name]
		cur[l.Name] = r.afterStep(l, st)
		if cur[l.Name] > prev {
			if msg := r.quotaOver(s.Namespace, cur); msg != "" {
				r.out.Warnings = append(r.out.Warnings, Warning{Reason: WarningQuotaRefused, Schedule: s.Key(), Target: st.Target, At: tr.At,
					Message: fmt.Sprintf("starting target %s would use %s: nothing of the transition is released", st.Target, msg)})
				return
			}
		}
	}
}

// quotaOver checks the namespace's device usage in the running set, with
// the allocated claims of its pods no schedule touches, against its
// ResourceQuotas; it describes the first limit exceeded ("" if none).
func (r *run) quotaOver(namespace string, running map[string]int32) string {
	used := map[string]int64{}
	for _, c := range r.in.Allocated {
		if c.Namespace == namespace {
			addUsage(used, []resourceapi.ResourceClaimSpec{c.Spec}, 1)
		}
	}
	for name, n := range running {
		l := r.loads[name]
		if l.Namespace != namespace {
			continue
		}
		for _, d := range l.Replica {
			addUsage(used, d.PodClaims, int64(n)*int64(d.Pods))
		}
	}
	for _, q := range r.in.Quotas {
		if q.Namespace != namespace {
			continue
		}
		names := make([]string, 0, len(q.Spec.Hard))
		for name := range q.Spec.Hard {
			names = append(names, string(name))
		}
		sort.Strings(names)
		for _, name := range names {
			if !strings.HasSuffix(name, v1.ResourceClaimsPerClass) {
				continue
			}
			hard := q.Spec.Hard[v1.ResourceName(name)]
			if used[name] > hard.Value() {
				return fmt.Sprintf("%d of %s in ResourceQuota %s (hard %s)", used[name], name, q.Name, hard.String())
			}
		}
	}
	return ""
}

// addUsage adds what the claim specs charge to a namespace's device quota,
// per class, times n: a firstAvailable list at its worst case, as
// Kubernetes counts it.
func addUsage(used map[string]int64, specs []resourceapi.ResourceClaimSpec, n int64) {
	for _, spec := range specs {
		for _, req := range spec.Devices.Requests {
			switch {
			case req.Exactly != nil:
				used[req.Exactly.DeviceClassName+v1.ResourceClaimsPerClass] += n * quotaCount(req.Exactly.AllocationMode, req.Exactly.Count)
			case len(req.FirstAvailable) > 0:
				worst := map[string]int64{}
				for _, sub := range req.FirstAvailable {
					worst[sub.DeviceClassName] = max(worst[sub.DeviceClassName], quotaCount(sub.AllocationMode, sub.Count))
				}
				for class, c := range worst {
					used[class+v1.ResourceClaimsPerClass] += n * c
				}
			}
		}
	}
}

func quotaCount(mode resourceapi.DeviceAllocationMode, count int64) int64 {
	switch mode {
	case resourceapi.DeviceAllocationModeAll:
		return resourceapi.AllocationResultsMaxSize
	case resourceapi.DeviceAllocationModeExactCount, "":
		return max(count, 1)
	}
	return 0
}
