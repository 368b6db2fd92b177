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

	"k8s.io/apimachinery/pkg/util/validation"
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

// Validate checks the scenario; each error names its field.
func (sc *Scenario) Validate() error {
	var errs problems
	errs.checkRequired(sc)
	nodes := errs.checkNodes(sc.Nodes)
	for _, plugin := range slices.Sorted(maps.Keys(sc.SchedulerPluginArgs)) {
		if _, ok := sc.SchedulerPluginArgs[plugin].(map[string]any); !ok {
			errs.add("schedulerPluginArgs."+plugin, "Invalid value: want the plugin's args as an object")
		}
	}
	checkpoints := map[string]bool{}
	for i, ev := range sc.Events {
		errs.checkEvent(fmt.Sprintf("events[%d]", i), ev, nodes, checkpoints)
	}
	if sc.End != nil && len(sc.Events) > 0 {
		last := sc.Events[0].At
		for _, ev := range sc.Events {
			last = max(last, ev.At)
		}
		if *sc.End < last {
			errs.add("end", "Invalid value: %s is before the last event (%s)", sc.End, last)
		}
	}
	return errors.Join(errs...)
}

// problems collects what Validate finds, in the order it checks.
type problems []error

// add records a problem with field, whose text starts with the kind of
// problem (Required value, Invalid value, …) as Kubernetes validation does.
func (p *problems) add(field, format string, args ...any) {
	*p = append(*p, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
}

// checkRequired checks the fields every scenario must set.
func (p *problems) checkRequired(sc *Scenario) {
	if sc.Name == "" {
		p.add("name", "Required value")
	}
	if sc.Start.IsZero() {
		p.add("start", "Required value: an RFC 3339 time such as 2026-10-19T00:00:00+07:00")
	}
	if len(sc.Nodes) == 0 {
		p.add("nodes", "Required value: at least one node")
	}
}

// checkNodes checks the nodes' names and profiles and returns the names
// seen.
func (p *problems) checkNodes(list []Node) map[string]bool {
	nodes := map[string]bool{}
	for i, n := range list {
		f := fmt.Sprintf("nodes[%d]", i)
		if n.Name == "" {
			p.add(f+".name", "Required value")
		} else if nodes[n.Name] {
			p.add(f+".name", "Duplicate value: %q", n.Name)
		}
		nodes[n.Name] = true
		if _, err := gpu.ParseProfile(n.Profile); err != nil {
			p.add(f+".profile", "Invalid value: %v", err)
		}
	}
	return nodes
}

// checkEvent checks the event at field f: one action, and that action's
// fields. checkpoints are the checkpoint names seen so far; nodes the
// scenario's node names.
func (p *problems) checkEvent(f string, ev Event, nodes, checkpoints map[string]bool) {
	actions := 0
	for _, set := range []bool{len(ev.Apply) > 0, ev.ApplyFile != "", len(ev.Delete) > 0, ev.Fault != nil, ev.Recover != nil, ev.Checkpoint != nil} {
		if set {
			actions++
		}
	}
	if actions != 1 {
		p.add(f, "Invalid value: exactly one of apply, applyFile, delete, fault, recover, checkpoint must be set (found %d)", actions)
	}
	for j, obj := range ev.Apply {
		g := fmt.Sprintf("%s.apply[%d]", f, j)
		if obj.GetAPIVersion() == "" || obj.GetKind() == "" {
			p.add(g, "Required value: apiVersion and kind")
		}
		if obj.GetName() == "" {
			p.add(g+".metadata.name", "Required value")
		}
	}
	for j, d := range ev.Delete {
		g := fmt.Sprintf("%s.delete[%d]", f, j)
		if d.Kind == "" {
			p.add(g+".kind", "Required value")
		}
		if d.Name == "" {
			p.add(g+".name", "Required value")
		}
	}
	if ev.Fault != nil {
		p.checkGPU(f+".fault", ev.Fault.GPURef, nodes)
	}
	if ev.Recover != nil {
		p.checkGPU(f+".recover", *ev.Recover, nodes)
	}
	if cp := ev.Checkpoint; cp != nil {
		p.checkCheckpoint(f+".checkpoint", cp, checkpoints)
	}
}

// checkGPU checks that the GPU at field g is on a node of the scenario.
func (p *problems) checkGPU(g string, r GPURef, nodes map[string]bool) {
	if !nodes[r.Node] {
		p.add(g+".node", "Invalid value: %q is not a node of this scenario", r.Node)
	}
	if r.GPU < 0 || r.GPU > 15 {
		p.add(g+".gpu", "Invalid value: %d: an index 0..15", r.GPU)
	}
}

// checkCheckpoint checks the checkpoint at field f: a unique name, then its
// expectations.
func (p *problems) checkCheckpoint(f string, cp *Checkpoint, checkpoints map[string]bool) {
	if cp.Name == "" {
		p.add(f+".name", "Required value")
	} else if checkpoints[cp.Name] {
		p.add(f+".name", "Duplicate value: %q", cp.Name)
	}
	checkpoints[cp.Name] = true
	p.checkExpect(f+".expect", cp.Expect)
}

// checkExpect checks the expectations at field f: names are namespace/name
// (pods: a glob), wait reasons are known, counts are positive.
func (p *problems) checkExpect(f string, exp Expect) {
	for j, pe := range exp.Pods {
		g := fmt.Sprintf("%s.pods[%d].name", f, j)
		if !strings.Contains(pe.Name, "/") {
			p.add(g, "Invalid value: %q: want namespace/name (a glob)", pe.Name)
		} else if _, err := path.Match(pe.Name, ""); err != nil {
			p.add(g, "Invalid value: %q: %v", pe.Name, err)
		}
		if pe.WaitReason != "" && !slices.Contains(waits.AllReasons, waits.Reason(pe.WaitReason)) {
			p.add(fmt.Sprintf("%s.pods[%d].waitReason", f, j), "Unsupported value: %q: supported values: %v", pe.WaitReason, waits.AllReasons)
		}
		for _, key := range slices.Sorted(maps.Keys(pe.Annotations)) {
			g := fmt.Sprintf("%s.pods[%d].annotations[%s]", f, j, key)
			if errs := validation.IsQualifiedName(key); len(errs) > 0 {
				p.add(g, "Invalid value: %q: %s", key, strings.Join(errs, "; "))
			} else if _, err := path.Match(pe.Annotations[key], ""); err != nil {
				p.add(g, "Invalid value: %q: %v", pe.Annotations[key], err)
			}
		}
	}
	for j, q := range exp.Quotas {
		g := fmt.Sprintf("%s.quotas[%d]", f, j)
		if q.Name == "" || strings.Contains(q.Name, "/") {
			p.add(g+".name", "Invalid value: %q: want the GPUQuota's name (its tenant's namespace)", q.Name)
		}
		if q.GuaranteesFit != "" && !slices.Contains([]string{"True", "False", "Unknown"}, q.GuaranteesFit) {
			p.add(g+".guaranteesFit", "Unsupported value: %q: supported values: True, False, Unknown", q.GuaranteesFit)
		}
	}
	for j, e := range exp.Events {
		g := fmt.Sprintf("%s.events[%d]", f, j)
		if strings.Count(e.Pod, "/") != 1 {
			p.add(g+".pod", "Invalid value: %q: want namespace/name", e.Pod)
		}
		if e.Reason == "" {
			p.add(g+".reason", "Required value")
		}
	}
	for j, m := range exp.MinReady {
		g := fmt.Sprintf("%s.minReady[%d]", f, j)
		if !strings.Contains(m.Workload, "/") {
			p.add(g+".workload", "Invalid value: %q: want namespace/name", m.Workload)
		}
		if m.Count < 1 {
			p.add(g+".count", "Invalid value: %d: at least 1", m.Count)
		}
	}
	for j, t := range exp.Targets {
		if !strings.Contains(t.Schedule, "/") {
			p.add(fmt.Sprintf("%s.targets[%d].schedule", f, j), "Invalid value: %q: want namespace/name", t.Schedule)
		}
	}
	for j, r := range exp.Reservations {
		if !strings.Contains(r.Name, "/") {
			p.add(fmt.Sprintf("%s.reservations[%d].name", f, j), "Invalid value: %q: want namespace/name", r.Name)
		}
	}
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
