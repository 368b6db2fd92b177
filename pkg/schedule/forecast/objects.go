package forecast

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/labels"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/schedule"
	"github.com/rota-dev/rota/pkg/schedule/preview"
)

// Workload is what the forecast needs of a Deployment or StatefulSet.
type Workload struct {
	Namespace, Kind, Name string
	// Replicas is spec.replicas (nil: 1).
	Replicas *int32
	Selector labels.Selector
	Template *v1.PodTemplateSpec
	// Annotations are the workload's; a stopped workload remembers its
	// replicas in rota.dev/replicas-before-stop.
	Annotations map[string]string
}

// Objects are the API objects a forecast is built from, read from files or
// from the cluster.
type Objects struct {
	Schedules []*v1alpha1.DeploySchedule
	// Workloads are the schedules' targets' workloads, and (from files)
	// workloads that no schedule touches, which run the whole range.
	Workloads    []Workload
	Templates    []*resourceapi.ResourceClaimTemplate
	Reservations []*v1alpha1.GPUReservation
	Nodes        []*v1.Node
	Slices       []*resourceapi.ResourceSlice
	Classes      []*resourceapi.DeviceClass
	// Pods and Claims (from the cluster): the allocated claims of pods that
	// no target's workload selects stay held over the range.
	Pods   []*v1.Pod
	Claims []*resourceapi.ResourceClaim
	// Services and Quotas of the schedules' namespaces: the forecast warns
	// of stops the alias guard will refuse and starts the quota will.
	Services []*v1.Service
	Quotas   []*v1.ResourceQuota
}

// Build compiles the schedules and turns the objects into an Input over
// [from, to). A schedule that does not compile is an error naming it; a
// workload whose claim template is missing is left out with a note.
func Build(o Objects, from, to time.Time) (Input, error) {
	in := Input{From: from, To: to, Nodes: o.Nodes, Classes: o.Classes, Quotas: o.Quotas,
		Slices: WithoutReserved(o.Slices, o.Reservations)}
	workloads := map[string]*Workload{}
	for i := range o.Workloads {
		w := &o.Workloads[i]
		workloads[w.Namespace+"/"+w.Kind+"/"+w.Name] = w
	}
	members := map[string]bool{}
	for _, r := range o.Reservations {
		for _, m := range r.Spec.Members {
			members[r.Namespace+"/"+m.WorkloadRef.Kind+"/"+m.WorkloadRef.Name] = true
		}
	}
	templates := map[string]*resourceapi.ResourceClaimTemplate{}
	for _, t := range o.Templates {
		templates[t.Namespace+"/"+t.Name] = t
	}
	touched := map[string]bool{}
	var selectors []Workload
	for _, ds := range o.Schedules {
		if ds.Spec.Mode == v1alpha1.ScheduleModeObserve {
			// It changes nothing: its workloads run as they are, counted
			// as always running (their pods' claims not a second time).
			for _, t := range ds.Spec.Targets {
				if w, ok := workloads[ds.Namespace+"/"+t.WorkloadRef.Kind+"/"+t.WorkloadRef.Name]; ok {
					selectors = append(selectors, *w)
				}
			}
			continue
		}
		compiled, err := schedule.Compile(ds)
		if err != nil {
			return Input{}, fmt.Errorf("DeploySchedule %s/%s: %w", ds.Namespace, ds.Name, err)
		}
		s := Schedule{Namespace: ds.Namespace, Name: ds.Name, Compiled: compiled, Targets: map[string]*Load{}}
		for _, t := range ds.Spec.Targets {
			key := ds.Namespace + "/" + t.WorkloadRef.Kind + "/" + t.WorkloadRef.Name
			touched[key] = true
			w, ok := workloads[key]
			if !ok || t.ReservationName != "" || members[key] {
				continue // unknown workload, or it runs on reserved GPUs
			}
			selectors = append(selectors, *w)
			load, err := loadOf(s.Key()+"/"+t.Name, w, templates)
			if err != nil {
				// One tenant's broken workload leaves its target out, not
				// everyone's forecast.
				in.Notes = append(in.Notes, fmt.Sprintf("%s left out: %v", s.Key()+"/"+t.Name, err))
				continue
			}
			load.Alias = aliasOf(w, o.Services)
			s.Targets[t.Name] = load
		}
		in.Schedules = append(in.Schedules, s)
	}
	for _, key := range slices.Sorted(maps.Keys(workloads)) {
		if touched[key] || members[key] {
			continue
		}
		w := workloads[key]
		if w.Replicas != nil && *w.Replicas == 0 {
			continue // stopped, and no schedule starts it
		}
		load, err := loadOf(key, w, templates)
		if err != nil {
			in.Notes = append(in.Notes, fmt.Sprintf("%s left out: %v", key, err))
			continue
		}
		in.Always = append(in.Always, *load)
	}
	in.Allocated = untouchedClaims(o.Pods, o.Claims, selectors)
	return in, nil
}

// loadOf is the load of workload w under name: the claims its pod template
// gets from ResourceClaimTemplates (claims named directly are shared and
// need no new devices).
func loadOf(name string, w *Workload, templates map[string]*resourceapi.ResourceClaimTemplate) (*Load, error) {
	d := preview.Demand{Pods: 1}
	for _, rc := range w.Template.Spec.ResourceClaims {
		if rc.ResourceClaimTemplateName == nil {
			continue
		}
		t, ok := templates[w.Namespace+"/"+*rc.ResourceClaimTemplateName]
		if !ok {
			return nil, fmt.Errorf("%s %s/%s: pod claim %q: ResourceClaimTemplate %s not found", w.Kind, w.Namespace, w.Name, rc.Name, *rc.ResourceClaimTemplateName)
		}
		d.PodClaims = append(d.PodClaims, t.Spec.Spec)
	}
	return &Load{Name: name, Replica: []preview.Demand{d}, Replicas: replicasOf(w), Namespace: w.Namespace}, nil
}

// replicasOf is how many replicas w runs when nothing pins the count: its
// spec, or, stopped, what it ran before Rota stopped it, else 1.
func replicasOf(w *Workload) int32 {
	if w.Replicas == nil {
		return 1
	}
	if *w.Replicas > 0 {
		return *w.Replicas
	}
	if n, err := strconv.ParseInt(w.Annotations[gpuv1.ReplicasBeforeStopAnnotation], 10, 32); err == nil && n > 0 {
		return int32(n)
	}
	return 1
}

// untouchedClaims are the allocated claims reserved only for pods that no
// target's workload selects.
func untouchedClaims(pods []*v1.Pod, claims []*resourceapi.ResourceClaim, targets []Workload) []*resourceapi.ResourceClaim {
	touched := map[string]bool{}
	for _, p := range pods {
		for _, w := range targets {
			if p.Namespace == w.Namespace && w.Selector != nil && w.Selector.Matches(labels.Set(p.Labels)) {
				touched[p.Namespace+"/"+p.Name] = true
			}
		}
	}
	var out []*resourceapi.ResourceClaim
	for _, c := range claims {
		if c.Status.Allocation == nil {
			continue
		}
		mine := false
		for _, r := range c.Status.ReservedFor {
			mine = mine || r.Resource == "pods" && touched[c.Namespace+"/"+r.Name]
		}
		if !mine {
			out = append(out, c)
		}
	}
	return out
}
