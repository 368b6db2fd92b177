package forecast

import (
	"fmt"
	"maps"
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
// before the transition (read only).
func (r *run) stepWarnings(s *Schedule, tr schedule.Transition, before map[string]int32, tl *schedule.Timeline) {
	// The replicas the steps so far changed; every other load runs as before.
	changed := make(map[string]int32, len(tr.Steps))
	replicas := func(name string) int32 {
		if n, ok := changed[name]; ok {
			return n
		}
		return before[name]
	}
	for _, st := range tr.Steps {
		l := s.Targets[st.Target]
		if l == nil {
			continue
		}
		if st.Action == schedule.ActionStop && l.Alias != "" {
			if intent := intentAt(tl, st.Target, tr.At); !intent.AllowDowntime {
				r.out.Warnings = append(r.out.Warnings, Warning{Reason: WarningAliasBlocked, Schedule: s.Key(), Target: st.Target, At: tr.At,
					Message: fmt.Sprintf("target %s serves %s and the interval from %s (window %s) does not allow downtime: it keeps running",
						st.Target, l.Alias, tr.At.Format(time.RFC3339), intent.Source)})
			}
		}
		prev := replicas(l.Name)
		changed[l.Name] = r.afterStep(l, st)
		if changed[l.Name] > prev {
			if msg := r.quotas.over(r, s.Namespace, tr.At, before, changed); msg != "" {
				r.out.Warnings = append(r.out.Warnings, Warning{Reason: WarningQuotaRefused, Schedule: s.Key(), Target: st.Target, At: tr.At,
					Message: fmt.Sprintf("starting target %s would use %s: nothing of the transition is released", st.Target, msg)})
				return
			}
		}
	}
}

// quotaCheck answers quota questions for many transitions: the device
// quotas per namespace, each load's use per replica, and a namespace's use
// before an instant, each computed once.
type quotaCheck struct {
	// limits are the ResourceQuotas of a namespace with a limit on DRA
	// devices, sorted limit names; nil: none.
	limits map[string][]quotaLimits
	// perReplica is what one replica of a load charges, per quota name.
	perReplica map[string]map[string]int64
	// before is a namespace's use in the running set before an instant.
	before map[quotaAt]map[string]int64
}

type quotaLimits struct {
	quota *v1.ResourceQuota
	names []string
}

type quotaAt struct {
	namespace string
	at        int64
}

func newQuotaCheck(quotas []*v1.ResourceQuota) *quotaCheck {
	q := &quotaCheck{limits: map[string][]quotaLimits{}, perReplica: map[string]map[string]int64{}, before: map[quotaAt]map[string]int64{}}
	for _, rq := range quotas {
		var names []string
		for name := range rq.Spec.Hard {
			if strings.HasSuffix(string(name), v1.ResourceClaimsPerClass) {
				names = append(names, string(name))
			}
		}
		if len(names) == 0 {
			continue
		}
		sort.Strings(names)
		q.limits[rq.Namespace] = append(q.limits[rq.Namespace], quotaLimits{quota: rq, names: names})
	}
	return q
}

// over checks the namespace's device usage in the running set (before,
// with the changed loads' replicas), with the allocated claims of its pods
// no schedule touches, against its ResourceQuotas; it describes the first
// limit exceeded ("" if none).
func (q *quotaCheck) over(r *run, namespace string, at time.Time, before, changed map[string]int32) string {
	limits := q.limits[namespace]
	if len(limits) == 0 {
		return ""
	}
	key := quotaAt{namespace: namespace, at: at.UnixNano()}
	base, ok := q.before[key]
	if !ok {
		base = map[string]int64{}
		for _, c := range r.in.Allocated {
			if c.Namespace == namespace {
				addUsage(base, []resourceapi.ResourceClaimSpec{c.Spec}, 1)
			}
		}
		for name, n := range before {
			if r.loads[name].Namespace == namespace {
				for k, v := range q.replica(r, name) {
					base[k] += int64(n) * v
				}
			}
		}
		q.before[key] = base
	}
	used := maps.Clone(base)
	for name, n := range changed {
		if r.loads[name].Namespace != namespace {
			continue
		}
		for k, v := range q.replica(r, name) {
			used[k] += int64(n-before[name]) * v
		}
	}
	for _, l := range limits {
		for _, name := range l.names {
			hard := l.quota.Spec.Hard[v1.ResourceName(name)]
			if used[name] > hard.Value() {
				return fmt.Sprintf("%d of %s in ResourceQuota %s (hard %s)", used[name], name, l.quota.Name, hard.String())
			}
		}
	}
	return ""
}

// replica is what one replica of the load charges to its namespace's
// device quota, per quota name.
func (q *quotaCheck) replica(r *run, load string) map[string]int64 {
	if u, ok := q.perReplica[load]; ok {
		return u
	}
	u := map[string]int64{}
	for _, d := range r.loads[load].Replica {
		addUsage(u, d.PodClaims, int64(d.Pods))
	}
	q.perReplica[load] = u
	return u
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
