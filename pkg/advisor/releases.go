package advisor

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/schedule"
)

// WorkloadOf names a pod's top-level workload as "Kind/name" (a
// Deployment, a StatefulSet), or "" when it has none.
type WorkloadOf func(*v1.Pod) string

// ScheduleReleases turns DeploySchedules into the releases the advisor
// waits for: with the schedule evaluator, every transition in [now,
// now+horizon) that stops a target releases that target's running pods.
// A transition that also starts or scales up a target is left out, since
// what it starts may take what it frees; a scale-down releases no pod (which
// replicas go is the workload controller's choice). Schedules that do not
// compile are skipped and named in the second result.
func ScheduleReleases(now time.Time, horizon time.Duration, schedules []*v1alpha1.DeploySchedule, pods []*v1.Pod, workloadOf WorkloadOf) ([]Release, []string) {
	var out []Release
	var skipped []string
	for _, ds := range schedules {
		s, err := schedule.Compile(ds)
		if err != nil {
			skipped = append(skipped, fmt.Sprintf("DeploySchedule %s/%s: %v", ds.Namespace, ds.Name, err))
			continue
		}
		tl, err := s.Evaluate(now, now.Add(horizon))
		if err != nil {
			skipped = append(skipped, fmt.Sprintf("DeploySchedule %s/%s: %v", ds.Namespace, ds.Name, err))
			continue
		}
		refs := map[string]string{}
		for _, t := range ds.Spec.Targets {
			refs[t.Name] = t.WorkloadRef.Kind + "/" + t.WorkloadRef.Name
		}
		for _, tr := range tl.Transitions {
			stops := map[string]bool{}
			acquires := false
			for _, st := range tr.Steps {
				switch st.Action {
				case schedule.ActionStop:
					stops[refs[st.Target]] = true
				case schedule.ActionStart:
					acquires = true
				case schedule.ActionScale:
					acquires = acquires || st.Replicas != 0
				}
			}
			if acquires || len(stops) == 0 {
				continue
			}
			r := Release{At: tr.At, Source: fmt.Sprintf("DeploySchedule %s/%s stops %s", ds.Namespace, ds.Name, joinSorted(stops))}
			for _, p := range pods {
				if p.Namespace == ds.Namespace && p.Spec.NodeName != "" && stops[workloadOf(p)] {
					r.Workloads = append(r.Workloads, podKey(p))
				}
			}
			if len(r.Workloads) > 0 {
				out = append(out, r)
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out, skipped
}

func joinSorted(m map[string]bool) string {
	keys := slices.Sorted(maps.Keys(m))
	out := ""
	for i, k := range keys {
		if i > 0 {
			out += ", "
		}
		out += k
	}
	return out
}
