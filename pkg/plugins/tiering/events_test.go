package tiering

import (
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
)

func TestQueueingHints(t *testing.T) {
	healthy := testSlice("n", gpus("H100", 80, 2)...)
	oneTainted := testSlice("n", gpu{model: "H100", memGiB: 80, tainted: true}, gpu{model: "H100", memGiB: 80})
	allocated := tieredClaim("p", 1, "H100")
	allocated.Status.Allocation = &resourceapi.AllocationResult{}
	pending := tieredClaim("p", 1, "H100")

	tests := map[string]struct {
		hint     fwk.QueueingHintFn
		old, new any
		want     fwk.QueueingHint
	}{
		"new slice":                {hint: isSchedulableAfterSliceChange, new: healthy, want: fwk.Queue},
		"device healed":            {hint: isSchedulableAfterSliceChange, old: oneTainted, new: healthy, want: fwk.Queue},
		"device turned unhealthy":  {hint: isSchedulableAfterSliceChange, old: healthy, new: oneTainted, want: fwk.QueueSkip},
		"slice unchanged":          {hint: isSchedulableAfterSliceChange, old: healthy, new: healthy, want: fwk.QueueSkip},
		"allocated claim deleted":  {hint: isSchedulableAfterClaimChange, old: allocated, want: fwk.Queue},
		"claim deallocated":        {hint: isSchedulableAfterClaimChange, old: allocated, new: pending, want: fwk.Queue},
		"claim allocated":          {hint: isSchedulableAfterClaimChange, old: pending, new: allocated, want: fwk.QueueSkip},
		"unallocated claim delete": {hint: isSchedulableAfterClaimChange, old: pending, want: fwk.QueueSkip},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			logger, _ := ktesting.NewTestContext(t)
			// Typed nils must stay untyped for util.As to see "no object".
			var oldObj, newObj any
			if tc.old != nil {
				oldObj = tc.old
			}
			if tc.new != nil {
				newObj = tc.new
			}
			got, err := tc.hint(logger, testPod("p"), oldObj, newObj)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("hint %v, want %v", got, tc.want)
			}
		})
	}
}
