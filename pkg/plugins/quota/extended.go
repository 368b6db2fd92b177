package quota

import (
	"context"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/gpupool"
)

// A pod may ask for devices as DRA extended resources (limits:
// {example.com/gpu: 1} for a DeviceClass with that extendedResourceName,
// or deviceclass.resource.kubernetes.io/<class>) instead of a claim.
// DynamicResources then allocates a claim it keeps in memory until its
// PreBind writes it, so neither PreFilter nor Reserve can see what such a
// pod gets. Quota checks it in PreBind, after DynamicResources: the claim
// is written and allocated by then, and refusing it makes the scheduler
// unreserve the pod, which deletes the claim. The pod waits with
// QuotaExceeded like a claim pod granted past a limit.

// PreBindPreFlight implements fwk.PreBindPlugin: Quota's PreBind has work
// for a limited tenant's pod that asks for DRA extended resources (it runs
// alone, after DynamicResources has written the claim), and for a pod
// whose borrower mark must be written or removed.
func (pl *Quota) PreBindPreFlight(_ context.Context, cs fwk.CycleState, pod *v1.Pod, _ string) (*fwk.PreBindPreFlightResult, *fwk.Status) {
	if t := pl.tenant(pod.Namespace); t != nil && len(t.Models) > 0 && pl.asksForExtendedResources(pod) {
		return &fwk.PreBindPreFlightResult{AllowParallel: false}, nil
	}
	if _, marked := pod.Annotations[gpuv1.BorrowedAnnotation]; marked {
		return &fwk.PreBindPreFlightResult{AllowParallel: true}, nil
	}
	if s, err := cs.Read(borrowStateKey); err == nil && len(s.(*borrowState).models) > 0 {
		return &fwk.PreBindPreFlightResult{AllowParallel: true}, nil
	}
	return nil, fwk.NewStatus(fwk.Skip)
}

// PreBind implements fwk.PreBindPlugin: it charges the devices the claim
// for the pod's extended resources was allocated and refuses the pod when
// they take its tenant past a limit; then it writes or removes the pod's
// borrower mark.
func (pl *Quota) PreBind(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, node string) *fwk.Status {
	if st := pl.preBindExtended(ctx, cs, pod, node); !st.IsSuccess() {
		return st
	}
	return pl.markBorrower(ctx, cs, pod)
}

func (pl *Quota) preBindExtended(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, node string) *fwk.Status {
	tenant := pl.tenant(pod.Namespace)
	if tenant == nil || !pl.asksForExtendedResources(pod) {
		return nil
	}
	claim, err := pl.extendedResourceClaim(pod)
	if err != nil {
		return fwk.AsStatus(err)
	}
	if claim == nil || claim.Status.Allocation == nil {
		return nil
	}
	inv, err := gpupool.CycleInventory(ctx, cs, pl.dra, &pl.caches.Slices)
	if err != nil {
		return fwk.AsStatus(err)
	}
	granted := pl.chargeOf(claim.Status.Allocation, inv)
	pl.mu.Lock()
	defer pl.mu.Unlock()
	use, err := pl.usageLocked(pod.Namespace, inv, sets.New(claim.UID))
	if err != nil {
		return fwk.AsStatus(err)
	}
	if over := overLimits(tenant, use, granted); len(over) > 0 {
		msg := fmt.Sprintf("on node %s the allocator granted %s for the pod's extended resources; %s", node, describeGrant(granted), strings.Join(over, ", "))
		return pl.reject(ctx, cs, node, pod, tenant, msg)
	}
	if borrowed := borrowedOf(pl.live.Table(), pod.Namespace, use, granted); len(borrowed) > 0 {
		cs.Write(borrowStateKey, &borrowState{models: borrowed})
	}
	klog.FromContext(ctx).V(4).Info("Quota charged extended resources", "pod", klog.KObj(pod), "claim", klog.KObj(claim), "granted", granted)
	return nil
}

// asksForExtendedResources says whether a container of pod asks for an
// extended resource a DeviceClass serves. A request equals its limit for
// extended resources, so the limits name them all.
func (pl *Quota) asksForExtendedResources(pod *v1.Pod) bool {
	resolver := pl.dra.DeviceClassResolver()
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			for name := range c.Resources.Limits {
				if strings.HasPrefix(string(name), resourceapi.ResourceDeviceClassPrefix) ||
					(resolver != nil && resolver.GetDeviceClass(name) != nil) {
					return true
				}
			}
		}
	}
	return false
}

// extendedResourceClaim is the claim DynamicResources wrote for pod's
// extended resources, as the claim tracker knows it (the assumed object,
// allocation included, right after DynamicResources' PreBind); nil when
// there is none. DynamicResources waits until the informer shows the claim
// it created before it assumes it, so the namespace index has it; only the
// pod's namespace is read.
func (pl *Quota) extendedResourceClaim(pod *v1.Pod) (*resourceapi.ResourceClaim, error) {
	claims, err := pl.claims.list(pod.Namespace)
	if err != nil {
		return nil, fmt.Errorf("the claim for the extended resources of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	for _, c := range claims {
		if c.Annotations[resourceapi.ExtendedResourceClaimAnnotation] != "true" {
			continue
		}
		for _, o := range c.OwnerReferences {
			if o.UID == pod.UID {
				return c, nil
			}
		}
	}
	return nil, nil
}
