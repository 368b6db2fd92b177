package report

import (
	"fmt"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/sandbox/cluster"
	"github.com/rota-dev/rota/pkg/waits"
)

// State is the cluster at one instant.
type State struct {
	Pods         []Pod
	Targets      []Target
	Reservations []Reservation
	// GPUs are the published devices, by "node/device".
	GPUs map[string]GPU
	// Holders are the allocated devices, by "node/device".
	Holders map[string]Holder
	// Ready counts each workload's Ready pods (not terminating).
	Ready map[string]int
	// DoubleBooked lists every device allocated exclusively to more than
	// one claim at once, one sentence each; it should stay empty.
	DoubleBooked []string
}

// Holder is who holds a device.
type Holder struct {
	Workload string
	Pod      string
	Claim    string
}

// Capture reads the state from the sandbox's caches.
func Capture(w *cluster.Watch) (*State, error) {
	st := &State{GPUs: map[string]GPU{}, Holders: map[string]Holder{}, Ready: map[string]int{}}
	slices, err := w.Slices.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	for _, s := range slices {
		if s.Spec.Driver != gpuv1.DriverName {
			continue
		}
		for _, d := range s.Spec.Devices {
			g := GPU{Node: s.Spec.Pool.Name, Name: d.Name, UUID: attr(d, gpuv1.AttributeUUID), Model: attr(d, gpuv1.AttributeModel)}
			for _, t := range d.Taints {
				g.Taints = append(g.Taints, fmt.Sprintf("%s=%s:%s", t.Key, t.Value, t.Effect))
			}
			st.GPUs[g.Node+"/"+g.Name] = g
		}
	}
	rsOwner := map[string]string{}
	replicaSets, err := w.ReplicaSets.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	for _, rs := range replicaSets {
		rsOwner[rs.Namespace+"/"+rs.Name] = ownerName(rs)
	}
	pods, err := w.Pods.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	byName := map[string]*Pod{}
	for _, p := range pods {
		rp := Pod{Name: p.Namespace + "/" + p.Name, Workload: workloadOf(p, rsOwner), Node: p.Spec.NodeName, Phase: string(p.Status.Phase), Ready: podReady(p)}
		if p.DeletionTimestamp != nil {
			rp.Phase = "Terminating"
		} else if rp.Ready {
			st.Ready[rp.Workload]++
		}
		if p.Spec.NodeName == "" {
			rp.Waiting = &Waiting{Reason: "Pending"}
			for _, c := range p.Status.Conditions {
				if c.Type == v1.PodScheduled && c.Status != v1.ConditionTrue {
					rp.Waiting.Reason, rp.Waiting.Message = c.Reason, c.Message
				}
			}
			if c := waits.Current(p); c != nil && c.Status == v1.ConditionTrue {
				rp.Waiting.Code = c.Reason
			}
		}
		st.Pods = append(st.Pods, rp)
	}
	sort.Slice(st.Pods, func(i, j int) bool { return st.Pods[i].Name < st.Pods[j].Name })
	for i := range st.Pods {
		byName[st.Pods[i].Name] = &st.Pods[i]
	}

	claims, err := w.Claims.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	sort.Slice(claims, func(i, j int) bool {
		return claims[i].Namespace+"/"+claims[i].Name < claims[j].Namespace+"/"+claims[j].Name
	})
	// Devices allocated without a share ID belong to one claim alone.
	exclusive := map[string]string{}
	for _, c := range claims {
		if c.Status.Allocation == nil {
			continue
		}
		claimName := c.Namespace + "/" + c.Name
		holder := Holder{Workload: claimName, Claim: claimName}
		for _, r := range c.Status.ReservedFor {
			if r.Resource == "pods" {
				holder.Pod = c.Namespace + "/" + r.Name
				if p := byName[holder.Pod]; p != nil {
					holder.Workload = p.Workload
				}
				break
			}
		}
		for _, res := range c.Status.Allocation.Devices.Results {
			if res.Driver != gpuv1.DriverName {
				continue
			}
			key := res.Pool + "/" + res.Device
			if res.ShareID == nil {
				if other, ok := exclusive[key]; ok {
					st.DoubleBooked = append(st.DoubleBooked, fmt.Sprintf("GPU %s held by claims %s and %s at once", key, other, claimName))
				}
				exclusive[key] = claimName
			}
			st.Holders[key] = holder
			g := st.GPUs[key]
			dev := Device{Node: res.Pool, Name: res.Device, UUID: g.UUID, Model: g.Model, Claim: claimName}
			for _, r := range c.Status.ReservedFor {
				if p := byName[c.Namespace+"/"+r.Name]; r.Resource == "pods" && p != nil {
					p.Devices = append(p.Devices, dev)
				}
			}
		}
	}

	schedules, err := w.Schedules.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	for _, obj := range schedules {
		var ds v1alpha1.DeploySchedule
		if err := fromUnstructured(obj, &ds); err != nil {
			return nil, err
		}
		for _, t := range ds.Status.Targets {
			rt := Target{Schedule: ds.Namespace + "/" + ds.Name, Target: t.Name, Phase: string(t.Phase), Reason: t.Reason, Message: t.Message}
			if t.Desired != nil {
				rt.DesiredState, rt.Source = string(t.Desired.State), t.Desired.Source
			}
			st.Targets = append(st.Targets, rt)
		}
	}
	sort.Slice(st.Targets, func(i, j int) bool {
		return st.Targets[i].Schedule+"/"+st.Targets[i].Target < st.Targets[j].Schedule+"/"+st.Targets[j].Target
	})

	reservations, err := w.Reservations.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	for _, obj := range reservations {
		var r v1alpha1.GPUReservation
		if err := fromUnstructured(obj, &r); err != nil {
			return nil, err
		}
		rr := Reservation{Name: r.Namespace + "/" + r.Name, Phase: string(r.Status.Phase), GPUs: r.Status.GPUCount,
			BudgetTotalMiB: r.Status.BudgetMiBPerGPU * int64(r.Status.GPUCount)}
		for _, m := range r.Status.Members {
			rr.BudgetUsedMiB += m.MemoryMiB
		}
		st.Reservations = append(st.Reservations, rr)
	}
	sort.Slice(st.Reservations, func(i, j int) bool { return st.Reservations[i].Name < st.Reservations[j].Name })
	return st, nil
}

// GPUsInUse is the number of allocated devices.
func (st *State) GPUsInUse() int { return len(st.Holders) }

func attr(d resourceapi.Device, name resourceapi.QualifiedName) string {
	if a, ok := d.Attributes[name]; ok && a.StringValue != nil {
		return *a.StringValue
	}
	return ""
}

func podReady(p *v1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// ownerName is "Kind/name" of the controller owning rs, or the ReplicaSet.
func ownerName(rs *appsv1.ReplicaSet) string {
	for _, o := range rs.OwnerReferences {
		if o.Controller != nil && *o.Controller {
			return rs.Namespace + "/" + o.Name
		}
	}
	return rs.Namespace + "/" + rs.Name
}

func workloadOf(p *v1.Pod, rsOwner map[string]string) string {
	for _, o := range p.OwnerReferences {
		if o.Controller == nil || !*o.Controller {
			continue
		}
		if o.Kind == "ReplicaSet" {
			if w, ok := rsOwner[p.Namespace+"/"+o.Name]; ok {
				return w
			}
			// The pod-template hash is the last dash-separated part.
			if i := strings.LastIndexByte(o.Name, '-'); i > 0 {
				return p.Namespace + "/" + o.Name[:i]
			}
		}
		return p.Namespace + "/" + o.Name
	}
	return p.Namespace + "/" + p.Name
}

func fromUnstructured(obj runtime.Object, into any) error {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return fmt.Errorf("unexpected object %T", obj)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into); err != nil {
		return fmt.Errorf("decoding %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	return nil
}
