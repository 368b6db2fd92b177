package chaos

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/rota-dev/rota/pkg/sandbox/cluster"
)

// Report is what a chaos run did and found.
type Report struct {
	Seed         uint64             `json:"seed"`
	KillsPlanned int                `json:"killsPlanned"`
	Timing       Timing             `json:"timing"`
	Nodes        []cluster.NodeSpec `json:"nodes"`
	// Kills per component kind and per process.
	Kills            map[string]int `json:"kills"`
	KillsByComponent map[string]int `json:"killsByComponent"`
	// Restarts per kind: every start after a process's first, after a kill
	// or after it exited by itself (SelfExits, e.g. a replica that lost its
	// lease).
	Restarts  map[string]int `json:"restarts"`
	SelfExits map[string]int `json:"selfExits"`
	// KilledMidWork counts the kills that found the named work under way.
	KilledMidWork map[string]int `json:"killedMidWork"`
	// DriverRestartsVerified counts the driver restarts after which the
	// checkpoint was seen to agree with the kubelet.
	DriverRestarts         int `json:"driverRestarts"`
	DriverRestartsVerified int `json:"driverRestartsVerified"`
	// APIFaults: the run injects none (see docs/reliability.md).
	APIFaults           int `json:"apiFaults"`
	GPUFaults           int `json:"gpuFaults"`
	GPURecoveries       int `json:"gpuRecoveries"`
	PodsCreated         int `json:"podsCreated"`
	PodsDeleted         int `json:"podsDeleted"`
	TransitionMutations int `json:"transitionMutations"`
	BoundariesJudged    int `json:"boundariesJudged"`
	// Checks per invariant.
	Checks     map[string]int `json:"checks"`
	Violations []Violation    `json:"violations"`
	Started    time.Time      `json:"started"`
	// WallSeconds is the whole run; KillPhaseSeconds the part with kills.
	WallSeconds      float64 `json:"wallSeconds"`
	KillPhaseSeconds float64 `json:"killPhaseSeconds"`
	Dir              string  `json:"dir"`
}

// Passed: every planned kill was sent and no invariant was broken.
func (r *Report) Passed() bool {
	total := 0
	for _, n := range r.Kills {
		total += n
	}
	return len(r.Violations) == 0 && total == r.KillsPlanned
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText writes a short summary with one table of kills and one of
// invariants.
func (r *Report) WriteText(w io.Writer) {
	total := 0
	for _, n := range r.Kills {
		total += n
	}
	verdict := "PASS"
	if !r.Passed() {
		verdict = "FAIL"
	}
	fmt.Fprintf(w, "Chaos run, seed %d: %s — %d of %d kills, %d violations, %.0f s (kills over %.0f s)\n\n",
		r.Seed, verdict, total, r.KillsPlanned, len(r.Violations), r.WallSeconds, r.KillPhaseSeconds)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "COMPONENT\tKILLS\tRESTARTS\tEXITED BY ITSELF")
	for _, k := range sortedKeys(r.Kills, r.Restarts) {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\n", k, r.Kills[k], r.Restarts[k], r.SelfExits[k])
	}
	_ = tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KILLED WHILE\tKILLS")
	for _, k := range sortedKeys(r.KilledMidWork) {
		fmt.Fprintf(tw, "%s\t%d\n", k, r.KilledMidWork[k])
	}
	_ = tw.Flush()
	fmt.Fprintln(w)
	violations := map[string]int{}
	for _, v := range r.Violations {
		violations[v.Invariant]++
	}
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "INVARIANT\tCHECKS\tVIOLATIONS")
	for _, inv := range Invariants {
		fmt.Fprintf(tw, "%s\t%d\t%d\n", inv, r.Checks[inv], violations[inv])
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "\nDriver restarts %d, checkpoint verified against the kubelet after %d; GPU faults %d, recoveries %d; "+
		"pods created %d, deleted %d; transition mutations %d, boundaries judged %d; API faults injected %d.\n",
		r.DriverRestarts, r.DriverRestartsVerified, r.GPUFaults, r.GPURecoveries, r.PodsCreated, r.PodsDeleted,
		r.TransitionMutations, r.BoundariesJudged, r.APIFaults)
	for _, v := range r.Violations {
		fmt.Fprintf(w, "VIOLATION %s %s (seen %d times): %s\n", v.At.Format(time.RFC3339), v.Invariant, v.Count, v.Detail)
	}
}

func sortedKeys(maps ...map[string]int) []string {
	var keys []string
	for _, m := range maps {
		for k := range m {
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	sort.Strings(keys)
	return keys
}

// stats are the run's counters, shared by its goroutines.
type stats struct {
	mu                                           sync.Mutex
	podsCreated, podsDeleted, faults, recoveries int
	driverRestarts, driverRestartsVerified       int
	kills, killsByComponent, midWork             map[string]int
}

func newStats() *stats {
	return &stats{kills: map[string]int{}, killsByComponent: map[string]int{}, midWork: map[string]int{}}
}

func (s *stats) add(field *int, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	*field += n
}
