package tiering

import (
	"context"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/gpupool"
	"github.com/rota-dev/rota/pkg/plugins/cyclestate"
	"github.com/rota-dev/rota/pkg/waits"
)

// grantedDevice is one device DynamicResources allocated for a tiered request.
type grantedDevice struct {
	id       structured.DeviceID
	request  string // "<request>/<subrequest>"
	tier     int    // 0-based
	tiers    int
	tierName string // subrequest name
	model    string // the device's model attribute, if it has one
	uuid     string
}

// placement is what Reserve learned from DynamicResources' allocation. It
// is written once and never changed, so Clone may share it.
type placement struct {
	node    string
	devices []grantedDevice
	// passedOver says, per tier preferred to a granted one, how much of it
	// was free and what kept the rest: "H100 tier: 0 of 8 free — 8 allocated".
	passedOver []waits.PassedTier
}

func (p *placement) Clone() fwk.StateData { return p }

func getPlacement(cs fwk.CycleState) (*placement, error) {
	return cyclestate.Read[*placement](cs, reserveStateKey)
}

// Reserve runs after DynamicResources' Reserve, reads the devices it chose
// (its pending allocation in the shared DRA manager) and re-checks them: a
// device that turned unhealthy (tainted) or vanished since Filter rejects
// the node for this cycle rather than binding the pod to a bad GPU.
func (pl *Tiering) Reserve(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	s, err := getPreFilterState(cs)
	if err != nil {
		return nil // not a tiered pod
	}
	logger := klog.FromContext(ctx)
	p := &placement{node: nodeName}
	for _, claim := range s.claims {
		alloc := pl.dra.ResourceClaims().GetPendingAllocation(claim.UID)
		if alloc == nil {
			continue
		}
		for _, res := range alloc.Devices.Results {
			req, ti, ok := requestTier(s, claim, res.Request)
			if !ok {
				continue
			}
			p.devices = append(p.devices, grantedDevice{
				id:       structured.MakeDeviceID(res.Driver, res.Pool, res.Device),
				request:  res.Request,
				tier:     ti,
				tiers:    len(req.Tiers),
				tierName: req.Tiers[ti].Name,
			})
		}
	}
	if st := pl.recheck(ctx, pod, s, p, stageReserve); st != nil {
		return st
	}
	p.passedOver = pl.passedOver(ctx, cs, pod, s, p)
	cs.Write(reserveStateKey, p)
	logger.V(4).Info("Tiered devices reserved", "pod", klog.KObj(pod), "node", nodeName, "devices", len(p.devices))
	return nil
}

// Unreserve has nothing to undo: Tiering changes nothing in Reserve.
func (pl *Tiering) Unreserve(context.Context, fwk.CycleState, *v1.Pod, string) {}

// recheck looks the granted devices up in the current slices of their
// pools (with DeviceTaintRules applied, see poolDevices) and fills in their
// UUID and model.
func (pl *Tiering) recheck(ctx context.Context, pod *v1.Pod, s *preFilterState, p *placement, stage string) *fwk.Status {
	logger := klog.FromContext(ctx)
	if _, err := pl.nodes.Get(p.node); apierrors.IsNotFound(err) {
		return pl.bindFailed(logger, pod, stage, waits.NodeLost, fmt.Sprintf("node %s was removed before binding", p.node))
	}
	// Read only the granted devices' pools, through the slice and taint
	// rule indexes: this runs twice per placement.
	ids := make([]structured.DeviceID, len(p.devices))
	for i, g := range p.devices {
		ids[i] = g.id
	}
	devices, err := pl.pools.devices(ids)
	if err != nil {
		return statusError(logger, fmt.Errorf("read the granted devices' slices: %w", err))
	}
	for i := range p.devices {
		g := &p.devices[i]
		d, ok := devices[g.id]
		if !ok {
			pl.metrics.healthRechecks.WithLabelValues("gone").Inc()
			return pl.bindFailed(logger, pod, stage, waits.StaleResourceSlice,
				fmt.Sprintf("device %s on node %s is no longer published by its ResourceSlices; placing the pod again with the current ones", g.id, p.node))
		}
		var tol []resourceapi.DeviceToleration
		if req, ti, ok := requestTierByRef(s, g.request); ok {
			tol = req.Tiers[ti].Tolerations
		}
		if t := gpupool.BlockingTaint(d, tol); t != nil {
			pl.metrics.healthRechecks.WithLabelValues("tainted").Inc()
			return pl.bindFailed(logger, pod, stage, waits.DeviceTainted,
				fmt.Sprintf("device %s on node %s turned unhealthy before binding (taint %s)", g.id, p.node, t.Key))
		}
		g.uuid = gpupool.StringAttribute(d, g.id.Driver.String(), gpuv1.AttributeUUID)
		g.model = gpupool.StringAttribute(d, g.id.Driver.String(), gpuv1.AttributeModel)
	}
	pl.metrics.healthRechecks.WithLabelValues("ok").Inc()
	return nil
}

func requestTierByRef(s *preFilterState, ref string) (*gpupool.Request, int, bool) {
	for i := range s.requests {
		r := &s.requests[i]
		for ti := range r.Tiers {
			if r.Ref(ti) == ref {
				return r, ti, true
			}
		}
	}
	return nil, 0, false
}

// PreBindPreFlight asks for PreBind only for tiered pods.
func (pl *Tiering) PreBindPreFlight(_ context.Context, cs fwk.CycleState, _ *v1.Pod, _ string) (*fwk.PreBindPreFlightResult, *fwk.Status) {
	if _, err := getPlacement(cs); err != nil {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	return &fwk.PreBindPreFlightResult{AllowParallel: false}, nil
}

// PreBind re-checks device health once more: binding may wait (Permit,
// device binding conditions) and a GPU can fail in between.
func (pl *Tiering) PreBind(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, _ string) *fwk.Status {
	p, err := getPlacement(cs)
	if err != nil {
		return nil
	}
	s, err := getPreFilterState(cs)
	if err != nil {
		return statusError(klog.FromContext(ctx), err)
	}
	return pl.recheck(ctx, pod, s, p, stagePreBind)
}

// PostBind explains the placement: a TieredPlacement Event and the
// placement metrics. The rota.dev/tier annotation is already on the pod: Bind
// wrote it with the binding. PostBind runs only after a successful binding,
// so the Event and the metrics count placements, not attempts.
func (pl *Tiering) PostBind(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, nodeName string) {
	p, err := getPlacement(cs)
	if err != nil || len(p.devices) == 0 {
		return
	}
	pl.handle.EventRecorder().Eventf(pod, nil, v1.EventTypeNormal, "TieredPlacement", "Scheduling", "%s", placementNote(p, pl.args.PolicyVersion))
	first := firstChoices(p)
	for _, g := range p.devices {
		pl.metrics.placements.WithLabelValues(fmt.Sprint(g.tier+1), g.model, pod.Namespace).Inc()
		outcome := "first"
		if g.tier > 0 {
			outcome = "fallback"
		}
		pl.metrics.firstChoice.WithLabelValues(first(g), g.model, outcome).Inc()
	}
	pl.metrics.timeToPlacement.Observe(time.Since(pod.CreationTimestamp.Time).Seconds())
	klog.FromContext(ctx).V(4).Info("Tiered placement recorded", "pod", klog.KObj(pod), "node", nodeName)
}

// firstChoices returns, for a granted device group of p, the model of its
// request's first tier: the granted model when the first tier was granted,
// else the first passed-over tier's ("unknown" when passed-over tiers
// could not be counted).
func firstChoices(p *placement) func(grantedDevice) string {
	first := map[string]string{} // request ("" when the pod has one) -> model of tier 1
	for _, t := range p.passedOver {
		if strings.HasPrefix(t.Tier, "1/") {
			first[t.Request] = t.Name
		}
	}
	return func(g grantedDevice) string {
		if g.tier == 0 {
			return g.model
		}
		req, _, _ := strings.Cut(g.request, "/")
		if m, ok := first[req]; ok {
			return m
		}
		if m, ok := first[""]; ok {
			return m
		}
		return "unknown"
	}
}
