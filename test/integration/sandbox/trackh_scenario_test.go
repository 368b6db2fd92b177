package sandbox

import (
	"slices"
	"testing"

	"github.com/rota-dev/rota/pkg/driver/gpu"
)

// TestScenarioTrackH plays examples/scenarios/track-h.yaml with the real
// driver: a DeploySchedule target bound to a GPUReservation starts at 08:00
// on the two GPUs the reservation holds, although its own claim template
// names neither them nor the reservation. Besides the checkpoints'
// expectations it checks the devices by UUID.
func TestScenarioTrackH(t *testing.T) {
	rep := playScenario(t, "track-h")
	if !rep.Passed {
		t.Error("report says FAIL")
	}
	held := []string{gpu.MockUUID("node-a", 0), gpu.MockUUID("node-a", 1)}
	for i, name := range []string{"gpu-0", "gpu-1"} {
		if got := publishedUUID(rep, "node-a", name); got != held[i] {
			t.Fatalf("node-a/%s published as %q, want the mock UUID %s", name, got, held[i])
		}
	}
	for _, cp := range rep.Checkpoints {
		for _, p := range podsOf(cp, "team-a/md-batch") {
			for _, d := range p.Devices {
				if slices.Contains(held, d.UUID) {
					t.Errorf("%s: non-member %s holds the held GPU %s", cp.Name, p.Name, d.Name)
				}
			}
		}
	}
	llama := podsOf(checkpoint(t, rep, "mon-0830-pinned"), "team-a/md-llama")
	if len(llama) != 1 {
		t.Fatalf("08:30: %d md-llama pods, want 1", len(llama))
	}
	var got []string
	for _, d := range llama[0].Devices {
		got = append(got, d.UUID)
	}
	slices.Sort(got)
	want := slices.Sorted(slices.Values(held))
	if !slices.Equal(got, want) {
		t.Errorf("08:30: md-llama holds %v, want the held %v", got, want)
	}
}
