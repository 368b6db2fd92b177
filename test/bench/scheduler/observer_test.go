//go:build benchscheduler

package scheduler

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	fwk "k8s.io/kube-scheduler/framework"
)

// observerName is a PostBind-only probe enabled in both benchmark profiles.
// For every bound pod it prints which firstAvailable tier its devices were
// granted at, so the summary can put the share of pods on each tier beside
// each profile's throughput. It changes no decision.
const observerName = "BenchTierObserver"

// tierLinePrefix starts each line the observer prints:
// "rota-bench-tier <tier>/<tiers> <cpu-ns> <peak-rss-bytes> [<reserved>]",
// tier 1-based, "0/0" for no tiered claim; cpu-ns is the benchmark
// process's CPU time (user+system) so far and peak-rss-bytes its VmHWM (see
// usage.go). reserved, only for a pod annotated checkReservedAnnotation, is
// what its GPUs are as to the reservation taint: "free" (none carries it),
// "tolerated" (one does, and the claim tolerates it) or "intruded" (one
// does, and the claim does not tolerate it: the allocator ignored a
// NoSchedule taint).
const tierLinePrefix = "rota-bench-tier"

// checkReservedAnnotation on a measured pod (MixedReservations) asks the
// observer to look up the taints of the GPUs it was granted. Only those
// pods pay for the lookup, so the other workloads measure what they did.
const checkReservedAnnotation = "rota-bench/check-reserved"

type tierObserver struct {
	dra fwk.SharedDRAManager
	mu  *sync.Mutex
	out io.Writer
	// binds counts the measured pods bound so far (-rota-bench-requests-at).
	binds int
}

func newTierObserver(out io.Writer) func(context.Context, runtime.Object, fwk.Handle) (fwk.Plugin, error) {
	mu := &sync.Mutex{}
	return func(_ context.Context, _ runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		// A workload's scheduler starts: its peak RSS counts from here.
		resetPeakRSS()
		return &tierObserver{dra: h.SharedDRAManager(), mu: mu, out: out}, nil
	}
}

func (o *tierObserver) Name() string { return observerName }

func (o *tierObserver) PostBind(_ context.Context, _ fwk.CycleState, pod *v1.Pod, _ string) {
	if len(pod.Spec.ResourceClaims) == 0 {
		// A workload's setup pod (BusyH100's CPU fillers), not a measured one.
		return
	}
	tier, tiers := 0, 0
	check := pod.Annotations[checkReservedAnnotation] == "true"
	reserved := "free"
	for i := range pod.Spec.ResourceClaims {
		name, _, err := resourceclaim.Name(pod, &pod.Spec.ResourceClaims[i])
		if err != nil || name == nil {
			continue
		}
		claim, err := o.dra.ResourceClaims().Get(pod.Namespace, *name)
		if err != nil || claim.Status.Allocation == nil {
			continue
		}
		for _, res := range claim.Status.Allocation.Devices.Results {
			if t, n, ok := subrequestRank(claim, res.Request); ok {
				tier, tiers = max(tier, t), n
			}
			if check {
				reserved = worse(reserved, o.reservedState(res))
			}
		}
	}
	suffix := ""
	if check {
		suffix = " " + reserved
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	fmt.Fprintf(o.out, "%s %d/%d %d %d%s\n", tierLinePrefix, tier, tiers, processCPU().Nanoseconds(), peakRSS(), suffix)
	o.binds++
	if o.binds == *requestsAt {
		printRequests(o.out)
	}
}

// subrequestRank returns the 1-based position of "<request>/<sub>" in the
// request's firstAvailable list and the list's length.
func subrequestRank(claim *resourceapi.ResourceClaim, ref string) (int, int, bool) {
	reqName, sub, ok := strings.Cut(ref, "/")
	if !ok {
		return 0, 0, false
	}
	for _, req := range claim.Spec.Devices.Requests {
		if req.Name != reqName {
			continue
		}
		for i, s := range req.FirstAvailable {
			if s.Name == sub {
				return i + 1, len(req.FirstAvailable), true
			}
		}
	}
	return 0, 0, false
}

// reservedState says whether the device of one allocation result carries
// the reservation taint (with DeviceTaintRules applied) and, if it does,
// whether the result's tolerations (the request's, copied at allocation)
// tolerate it.
func (o *tierObserver) reservedState(res resourceapi.DeviceRequestAllocationResult) string {
	list, err := o.dra.ResourceSlices().ListWithDeviceTaintRules()
	if err != nil {
		return "free"
	}
	for _, s := range list {
		if s.Spec.Driver != res.Driver || s.Spec.Pool.Name != res.Pool {
			continue
		}
		for _, d := range s.Spec.Devices {
			if d.Name != res.Device {
				continue
			}
			return taintState(d.Taints, res.Tolerations)
		}
	}
	return "free"
}
