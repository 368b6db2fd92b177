package sandbox

import (
	"slices"
	"strings"
	"testing"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
)

// Guarantees, borrowing and reclaim (examples/scenarios/guarantee-reclaim.yaml,
// docs/admission.md): team-b borrows idle team-a's half of 2 × 8 H100s;
// team-a's 4-GPU gang takes it back from team-b's two newest borrowers
// and runs whole, and team-b keeps the 12 GPUs of its other six jobs.
func TestScenarioGuaranteeReclaim(t *testing.T) {
	rep := playScenario(t, "guarantee-reclaim")
	if !rep.Passed {
		t.Error("report says FAIL")
	}

	borrowers := map[string]string{}
	for _, p := range checkpoint(t, rep, "b-borrows-the-pool").Pods {
		borrowers[p.Name] = p.Annotations[gpuv1.BorrowedAnnotation]
	}
	for i, name := range []string{"team-b/b-0", "team-b/b-1", "team-b/b-2", "team-b/b-3", "team-b/b-4", "team-b/b-5", "team-b/b-6", "team-b/b-7"} {
		want := ""
		if i >= 4 {
			want = "H100=2" // beyond team-b's guarantee of 8
		}
		if got, ok := borrowers[name]; !ok || got != want {
			t.Errorf("before the gang: %s borrower mark %q (present %v), want %q", name, got, ok, want)
		}
	}

	held := map[string]int{}
	var names []string
	for _, p := range checkpoint(t, rep, "a-reclaims-its-guarantee").Pods {
		if p.Phase == "Terminating" {
			continue
		}
		names = append(names, p.Name)
		ns, _, _ := strings.Cut(p.Name, "/")
		held[ns] += len(p.Devices)
		if ns == "team-a" {
			if p.Phase != "Running" || len(p.Devices) != 2 {
				t.Errorf("after the reclaim: %s %s with %d GPUs, want Running with 2", p.Name, p.Phase, len(p.Devices))
			}
		}
	}
	want := []string{"team-a/train-0", "team-a/train-1", "team-b/b-0", "team-b/b-1", "team-b/b-2", "team-b/b-3", "team-b/b-4", "team-b/b-5"}
	if !slices.Equal(names, want) {
		t.Errorf("after the reclaim the pods are %v, want %v: the newest borrowers b-6 and b-7 reclaimed", names, want)
	}
	if held["team-a"] != 4 || held["team-b"] != 12 {
		t.Errorf("after the reclaim team-a holds %d GPUs and team-b %d, want 4 and 12", held["team-a"], held["team-b"])
	}

	// Raised to 16, team-b's guarantee and team-a's 8 exceed the pool: the
	// GPUQuota status controller says so on both, with the numbers.
	for _, q := range checkpoint(t, rep, "guarantees-exceed-the-pool").Quotas {
		want := "H100: guarantees 24 (team-a 8, team-b 16) exceed the 16 healthy GPUs by 8"
		if q.GuaranteesFit != "False" || q.Message != want {
			t.Errorf("GPUQuota %s: GuaranteesFit %s %q, want False %q", q.Name, q.GuaranteesFit, q.Message, want)
		}
	}
}
