package scenario

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/rota-dev/rota/pkg/driver/gpu"
	"github.com/rota-dev/rota/pkg/waits"
)

// Load reads and checks a scenario file.
func Load(file string) (*Scenario, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("reading scenario: %w", err)
	}
	sc, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	sc.Dir = filepath.Dir(file)
	for i, ev := range sc.Events {
		if ev.ApplyFile != "" {
			if _, err := os.Stat(filepath.Join(sc.Dir, ev.ApplyFile)); err != nil {
				return nil, fmt.Errorf("%s: events[%d].applyFile: %w", file, i, err)
			}
		}
	}
	return sc, nil
}

// Parse decodes a scenario and checks it; errors name the field.
func Parse(data []byte) (*Scenario, error) {
	var sc Scenario
	if err := yaml.UnmarshalStrict(data, &sc); err != nil {
		return nil, fmt.Errorf("decoding scenario: %w", err)
	}
	if err := sc.Validate(); err != nil {
		return nil, err
	}
	// Events run in time order; those at the same time in file order.
	sort.SliceStable(sc.Events, func(i, j int) bool { return sc.Events[i].At < sc.Events[j].At })
	return &sc, nil
}

// Validate checks the scenario.
func (sc *Scenario) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	if sc.Name == "" {
		bad("name", "Required value")
	}
	if sc.Start.IsZero() {
		bad("start", "Required value: an RFC 3339 time such as 2026-10-19T00:00:00+07:00")
	}
	if len(sc.Nodes) == 0 {
		bad("nodes", "Required value: at least one node")
	}
	nodes := map[string]bool{}
	for i, n := range sc.Nodes {
		f := fmt.Sprintf("nodes[%d]", i)
		if n.Name == "" {
			bad(f+".name", "Required value")
		} else if nodes[n.Name] {
			bad(f+".name", "Duplicate value: %q", n.Name)
		}
		nodes[n.Name] = true
		if _, err := gpu.ParseProfile(n.Profile); err != nil {
			bad(f+".profile", "Invalid value: %v", err)
		}
	}
	for _, plugin := range slices.Sorted(maps.Keys(sc.SchedulerPluginArgs)) {
		if _, ok := sc.SchedulerPluginArgs[plugin].(map[string]any); !ok {
			bad("schedulerPluginArgs."+plugin, "Invalid value: want the plugin's args as an object")
		}
	}
	checkpoints := map[string]bool{}
	for i, ev := range sc.Events {
		f := fmt.Sprintf("events[%d]", i)
		actions := 0
		for _, set := range []bool{len(ev.Apply) > 0, ev.ApplyFile != "", len(ev.Delete) > 0, ev.Fault != nil, ev.Recover != nil, ev.Checkpoint != nil} {
			if set {
				actions++
			}
		}
		if actions != 1 {
			bad(f, "Invalid value: exactly one of apply, applyFile, delete, fault, recover, checkpoint must be set (found %d)", actions)
		}
		for j, obj := range ev.Apply {
			g := fmt.Sprintf("%s.apply[%d]", f, j)
			if obj.GetAPIVersion() == "" || obj.GetKind() == "" {
				bad(g, "Required value: apiVersion and kind")
			}
			if obj.GetName() == "" {
				bad(g+".metadata.name", "Required value")
			}
		}
		for j, d := range ev.Delete {
			g := fmt.Sprintf("%s.delete[%d]", f, j)
			if d.Kind == "" {
				bad(g+".kind", "Required value")
			}
			if d.Name == "" {
				bad(g+".name", "Required value")
			}
		}
		checkGPU := func(g string, r GPURef) {
			if !nodes[r.Node] {
				bad(g+".node", "Invalid value: %q is not a node of this scenario", r.Node)
			}
			if r.GPU < 0 || r.GPU > 15 {
				bad(g+".gpu", "Invalid value: %d: an index 0..15", r.GPU)
			}
		}
		if ev.Fault != nil {
			checkGPU(f+".fault", ev.Fault.GPURef)
		}
		if ev.Recover != nil {
			checkGPU(f+".recover", *ev.Recover)
		}
		if cp := ev.Checkpoint; cp != nil {
			if cp.Name == "" {
				bad(f+".checkpoint.name", "Required value")
			} else if checkpoints[cp.Name] {
				bad(f+".checkpoint.name", "Duplicate value: %q", cp.Name)
			}
			checkpoints[cp.Name] = true
			for j, p := range cp.Expect.Pods {
				g := fmt.Sprintf("%s.checkpoint.expect.pods[%d].name", f, j)
				if !strings.Contains(p.Name, "/") {
					bad(g, "Invalid value: %q: want namespace/name (a glob)", p.Name)
				} else if _, err := path.Match(p.Name, ""); err != nil {
					bad(g, "Invalid value: %q: %v", p.Name, err)
				}
				if p.WaitReason != "" && !slices.Contains(waits.AllReasons, waits.Reason(p.WaitReason)) {
					bad(fmt.Sprintf("%s.checkpoint.expect.pods[%d].waitReason", f, j), "Unsupported value: %q: supported values: %v", p.WaitReason, waits.AllReasons)
				}
			}
			for j, m := range cp.Expect.MinReady {
				g := fmt.Sprintf("%s.checkpoint.expect.minReady[%d]", f, j)
				if !strings.Contains(m.Workload, "/") {
					bad(g+".workload", "Invalid value: %q: want namespace/name", m.Workload)
				}
				if m.Count < 1 {
					bad(g+".count", "Invalid value: %d: at least 1", m.Count)
				}
			}
			for j, t := range cp.Expect.Targets {
				if !strings.Contains(t.Schedule, "/") {
					bad(fmt.Sprintf("%s.checkpoint.expect.targets[%d].schedule", f, j), "Invalid value: %q: want namespace/name", t.Schedule)
				}
			}
			for j, r := range cp.Expect.Reservations {
				if !strings.Contains(r.Name, "/") {
					bad(fmt.Sprintf("%s.checkpoint.expect.reservations[%d].name", f, j), "Invalid value: %q: want namespace/name", r.Name)
				}
			}
		}
	}
	if sc.End != nil && len(sc.Events) > 0 {
		last := sc.Events[0].At
		for _, ev := range sc.Events {
			last = max(last, ev.At)
		}
		if *sc.End < last {
			bad("end", "Invalid value: %s is before the last event (%s)", sc.End, last)
		}
	}
	return errors.Join(errs...)
}

// EndOffset is when the run stops.
func (sc *Scenario) EndOffset() Offset {
	if sc.End != nil {
		return *sc.End
	}
	var last Offset
	for _, ev := range sc.Events {
		last = max(last, ev.At)
	}
	return last
}
