package report

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/rota-dev/rota/pkg/advisor"
	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/gpupool"
	"github.com/rota-dev/rota/pkg/sandbox/cluster"
	"github.com/rota-dev/rota/pkg/waits"
)

// State is the cluster at one instant.
type State struct {
	Pods         []Pod
	Targets      []Target
	Reservations []Reservation
	Quotas       []Quota
	// GPUs are the published devices, by "node/device".
	GPUs map[string]GPU
	// Holders are the allocated devices, by "node/device".
	Holders map[string]Holder
	// Ready counts each workload's Ready pods (not terminating).
	Ready map[string]int
	// DoubleBooked lists every device allocated exclusively to more than
	// one claim at once, one sentence each; it should stay empty.
	DoubleBooked []string
	// Events are the Events about pods, those deleted included, in the
	// order they were first recorded.
	Events []PodEvent
}

// PodEvent is one Event about a pod.
type PodEvent struct {
	// Pod is namespace/name.
	Pod    string
	Reason string
	Type   string
	Note   string
}

// Holder is who holds a device.
type Holder struct {
	Workload string
	Pod      string
	Claim    string
}

// Capture reads the state from the sandbox's caches. The GPUs and who
// holds them come from the pool model (pkg/gpupool).
func Capture(w *cluster.Watch) (*State, error) {
	st := &State{GPUs: map[string]GPU{}, Holders: map[string]Holder{}, Ready: map[string]int{}}
	pool, err := capturePool(w)
	if err != nil {
		return nil, err
	}
	st.addGPUs(pool)
	byName, err := st.addPods(w)
	if err != nil {
		return nil, err
	}
	st.addHolders(pool, byName)
	if err := st.addTargets(w); err != nil {
		return nil, err
	}
	if err := st.addReservations(w); err != nil {
		return nil, err
	}
	if err := st.addQuotas(w); err != nil {
		return nil, err
	}
	if err := st.addEvents(w); err != nil {
		return nil, err
	}
	return st, nil
}

// capturePool builds the pool of the driver's devices and the claims.
func capturePool(w *cluster.Watch) (*gpupool.Pool, error) {
	slices, err := w.Slices.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	var ours []*resourceapi.ResourceSlice
	for _, s := range slices {
		if s.Spec.Driver == gpuv1.DriverName {
			ours = append(ours, s)
		}
	}
	claims, err := w.Claims.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	sort.Slice(claims, func(i, j int) bool {
		return claims[i].Namespace+"/"+claims[i].Name < claims[j].Namespace+"/"+claims[j].Name
	})
	return gpupool.NewPool(ours, claims, nil), nil
}

// deviceKey is "node/device" (the sandbox names each node's pool after it).
func deviceKey(d *gpupool.Device) string { return d.ID.Pool.String() + "/" + d.ID.Device.String() }

// addGPUs records every published device.
func (st *State) addGPUs(pool *gpupool.Pool) {
	for _, d := range pool.Devices() {
		g := GPU{Node: d.ID.Pool.String(), Name: d.ID.Device.String(), UUID: d.UUID(), Model: d.Model()}
		for _, t := range d.Device.Taints {
			g.Taints = append(g.Taints, fmt.Sprintf("%s=%s:%s", t.Key, t.Value, t.Effect))
		}
		st.GPUs[deviceKey(d)] = g
	}
}

// addPods records every pod, sorted by name, and returns them by name.
func (st *State) addPods(w *cluster.Watch) (map[string]*Pod, error) {
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
	for _, p := range pods {
		rp := Pod{Name: p.Namespace + "/" + p.Name, Workload: workloadOf(p, rsOwner), Node: p.Spec.NodeName, Phase: string(p.Status.Phase), Ready: podReady(p)}
		rp.Annotations = rotaAnnotations(p)
		if p.DeletionTimestamp != nil {
			rp.Phase = "Terminating"
		} else if rp.Ready {
			st.Ready[rp.Workload]++
		}
		if p.Spec.NodeName == "" {
			rp.Waiting = waitingOf(p)
		} else if c := waits.Current(p); c != nil && c.Status == v1.ConditionTrue {
			// Placed but not started (StartFailed): it still waits.
			rp.Waiting = &Waiting{Reason: string(p.Status.Phase), Message: c.Message, Code: c.Reason}
		}
		st.Pods = append(st.Pods, rp)
	}
	sort.Slice(st.Pods, func(i, j int) bool { return st.Pods[i].Name < st.Pods[j].Name })
	byName := make(map[string]*Pod, len(st.Pods))
	for i := range st.Pods {
		byName[st.Pods[i].Name] = &st.Pods[i]
	}
	return byName, nil
}

// rotaAnnotations are p's rota.dev/ annotations but the advice; nil when
// none.
func rotaAnnotations(p *v1.Pod) map[string]string {
	var out map[string]string
	for k, v := range p.Annotations {
		if strings.HasPrefix(k, v1alpha1.GroupName+"/") && k != gpuv1.AdviceAnnotation {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}

// addQuotas records the GPUQuotas' GuaranteesFit conditions, sorted.
func (st *State) addQuotas(w *cluster.Watch) error {
	if w.Quotas == nil {
		return nil
	}
	quotas, err := w.Quotas.List(labels.Everything())
	if err != nil {
		return err
	}
	for _, obj := range quotas {
		var q v1alpha1.GPUQuota
		if err := fromUnstructured(obj, &q); err != nil {
			return err
		}
		rq := Quota{Name: q.Name}
		if c := meta.FindStatusCondition(q.Status.Conditions, v1alpha1.ConditionGuaranteesFit); c != nil {
			rq.GuaranteesFit, rq.Reason, rq.Message = string(c.Status), c.Reason, c.Message
		}
		st.Quotas = append(st.Quotas, rq)
	}
	sort.Slice(st.Quotas, func(i, j int) bool { return st.Quotas[i].Name < st.Quotas[j].Name })
	return nil
}

// addEvents records the Events about pods, oldest first.
func (st *State) addEvents(w *cluster.Watch) error {
	if w.Events == nil {
		return nil
	}
	events, err := w.Events.List(labels.Everything())
	if err != nil {
		return err
	}
	sort.SliceStable(events, func(i, j int) bool {
		a, b := events[i].EventTime.Time, events[j].EventTime.Time
		if a.Equal(b) {
			return events[i].Name < events[j].Name
		}
		return a.Before(b)
	})
	for _, e := range events {
		if e.Regarding.Kind != "Pod" {
			continue
		}
		st.Events = append(st.Events, PodEvent{Pod: e.Regarding.Namespace + "/" + e.Regarding.Name, Reason: e.Reason, Type: e.Type, Note: e.Note})
	}
	return nil
}

// waitingOf is why an unbound pod waits.
func waitingOf(p *v1.Pod) *Waiting {
	wt := &Waiting{Reason: "Pending"}
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodScheduled && c.Status != v1.ConditionTrue {
			wt.Reason, wt.Message = c.Reason, c.Message
		}
	}
	if c := waits.Current(p); c != nil && c.Status == v1.ConditionTrue {
		wt.Code = c.Reason
		if raw, ok := p.Annotations[gpuv1.AdviceAnnotation]; ok {
			var adv advisor.Advice
			if err := json.Unmarshal([]byte(raw), &adv); err == nil {
				wt.Advice = adv.Options
			}
		}
	}
	return wt
}

// addHolders records who holds each allocated device, gives the pods
// their devices, and notes every device allocated exclusively (without a
// share ID) to more than one claim at once.
func (st *State) addHolders(pool *gpupool.Pool, byName map[string]*Pod) {
	for _, d := range pool.Devices() {
		key := deviceKey(d)
		exclusive := ""
		for _, a := range d.Allocations {
			claimName := a.Claim.String()
			if !a.Shared {
				if exclusive != "" {
					st.DoubleBooked = append(st.DoubleBooked, fmt.Sprintf("GPU %s held by claims %s and %s at once", key, exclusive, claimName))
				}
				exclusive = claimName
			}
			holder := Holder{Workload: claimName, Claim: claimName}
			if len(a.Pods) > 0 {
				holder.Pod = a.Pods[0].String()
				if p := byName[holder.Pod]; p != nil {
					holder.Workload = p.Workload
				}
			}
			st.Holders[key] = holder
			g := st.GPUs[key]
			dev := Device{Node: g.Node, Name: g.Name, UUID: g.UUID, Model: g.Model, Claim: claimName}
			for _, pod := range a.Pods {
				if p := byName[pod.String()]; p != nil {
					p.Devices = append(p.Devices, dev)
				}
			}
		}
	}
}

// addTargets records the DeploySchedules' targets, sorted.
func (st *State) addTargets(w *cluster.Watch) error {
	schedules, err := w.Schedules.List(labels.Everything())
	if err != nil {
		return err
	}
	for _, obj := range schedules {
		var ds v1alpha1.DeploySchedule
		if err := fromUnstructured(obj, &ds); err != nil {
			return err
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
	return nil
}

// addReservations records the GPUReservations, sorted.
func (st *State) addReservations(w *cluster.Watch) error {
	reservations, err := w.Reservations.List(labels.Everything())
	if err != nil {
		return err
	}
	for _, obj := range reservations {
		var r v1alpha1.GPUReservation
		if err := fromUnstructured(obj, &r); err != nil {
			return err
		}
		rr := Reservation{Name: r.Namespace + "/" + r.Name, Phase: string(r.Status.Phase), GPUs: r.Status.GPUCount,
			BudgetTotalMiB: r.Status.BudgetMiBPerGPU * int64(r.Status.GPUCount)}
		for _, m := range r.Status.Members {
			rr.BudgetUsedMiB += m.MemoryMiB
		}
		st.Reservations = append(st.Reservations, rr)
	}
	sort.Slice(st.Reservations, func(i, j int) bool { return st.Reservations[i].Name < st.Reservations[j].Name })
	return nil
}

// GPUsInUse is the number of allocated devices.
func (st *State) GPUsInUse() int { return len(st.Holders) }

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
