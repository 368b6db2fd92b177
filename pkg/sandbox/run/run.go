// Package run plays a scenario against a sandbox on a virtual clock: it
// applies the scenario's events at their offsets, lets the cluster settle
// after each step, jumps the clock to the next event or the next timer of
// the kubelets and controllers, and reports at every checkpoint.
package run

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/sandbox/cluster"
	"github.com/rota-dev/rota/pkg/sandbox/report"
	"github.com/rota-dev/rota/pkg/sandbox/scenario"
	"github.com/rota-dev/rota/pkg/sandbox/timeline"
	"github.com/rota-dev/rota/pkg/schedule"
	"github.com/rota-dev/rota/pkg/sim/vclock"
)

// Options configure a run.
type Options struct {
	// RepoRoot holds manifests/.
	RepoRoot string
	// Dir receives the control plane's data and the kubeconfig.
	Dir      string
	Scenario *scenario.Scenario
	// Timeline is where the HTML timeline is written ("" for none).
	Timeline string
	// Quiet is how long (real time) nothing may change before the cluster
	// counts as settled. Default 100ms.
	Quiet time.Duration
	// Observe, when set, is called after every checkpoint and once more
	// when the scenario has played, with the sandbox up and the virtual
	// time (test/integration/monitoring scrapes the components' metrics
	// there). An error fails the run.
	Observe func(ctx context.Context, c *cluster.Cluster, at time.Time) error
	// Progress, when set, receives a line when the sandbox starts, when it
	// is up and at every checkpoint, for a person watching the run.
	Progress io.Writer
}

// Run plays the scenario and returns its report. An error means the run
// could not be carried out; failed expectations are in the report.
func Run(ctx context.Context, o Options) (*report.Report, error) {
	sc := o.Scenario
	if o.Quiet <= 0 {
		o.Quiet = 100 * time.Millisecond
	}
	logger := klog.FromContext(ctx)
	wallStart := time.Now()
	clk := vclock.New(sc.Start)
	nodes := make([]cluster.NodeSpec, 0, len(sc.Nodes))
	for _, n := range sc.Nodes {
		nodes = append(nodes, cluster.NodeSpec{Name: n.Name, Profile: n.Profile, ConsumableMemory: n.ConsumableMemory})
	}
	opts := cluster.Options{RepoRoot: o.RepoRoot, Dir: o.Dir, Nodes: nodes, Clock: clk, Kubelet: cluster.KubeletTiming{
		StartDelay: offsetOr(sc.Kubelet.StartDelay, 5*time.Second), ReadyDelay: offsetOr(sc.Kubelet.ReadyDelay, 10*time.Second),
		MaxGracePeriod: offsetOr(sc.Kubelet.MaxGracePeriod, 30*time.Second),
	}}
	if sc.PassPeriod != nil {
		opts.PassPeriod = sc.PassPeriod.Duration()
	}
	opts.SchedulerPluginArgs = sc.SchedulerPluginArgs
	p := progress{w: o.Progress, start: wallStart}
	p.printf("%s: starting a control plane (kube-apiserver, etcd), Rota's scheduler and controllers, and %d simulated GPU node(s)", sc.Name, len(nodes))
	c, err := cluster.Start(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("starting the sandbox: %w", err)
	}
	defer c.Stop()
	logger.V(1).Info("Sandbox up", "kubeconfig", c.Kubeconfig)
	end := sc.Start.Add(sc.EndOffset().Duration())
	p.printf("%s: up; playing %d event(s) from %s to %s on a virtual clock", sc.Name, len(sc.Events),
		sc.Start.Format(progressTime), end.Format(progressTime))

	r := &runner{o: o, c: c, clk: clk, log: report.NewTransitionLog(), rec: timeline.NewRecorder(), progress: p}
	c.Watch.OnChange(r.log.Observe)
	rep, err := r.play(ctx)
	if err != nil {
		return nil, err
	}
	if o.Observe != nil {
		if err := o.Observe(ctx, c, clk.Now()); err != nil {
			return nil, fmt.Errorf("observing the end of the scenario: %w", err)
		}
	}
	rep.WallSeconds = time.Since(wallStart).Seconds()
	return rep, nil
}

func offsetOr(o *scenario.Offset, def time.Duration) time.Duration {
	if o == nil {
		return def
	}
	return o.Duration()
}

type runner struct {
	o   Options
	c   *cluster.Cluster
	clk *vclock.Clock
	log *report.TransitionLog
	rec *timeline.Recorder

	progress progress

	maxInUse    int
	checkpoints []report.Checkpoint
	lastState   *report.State
	// Since the previous checkpoint: each workload's fewest Ready pods at
	// a sample, and the double bookings seen.
	minReady     map[string]int
	doubleBooked []string
}

// settle waits for quiet and samples the GPUs.
func (r *runner) settle(ctx context.Context) error {
	if err := r.c.Settle(ctx, r.o.Quiet, 2*time.Minute); err != nil {
		return err
	}
	st, err := report.Capture(r.c.Watch)
	if err != nil {
		return err
	}
	r.maxInUse = max(r.maxInUse, st.GPUsInUse())
	r.rec.Add(r.clk.Now(), st)
	r.lastState = st
	if r.minReady == nil {
		r.minReady = maps.Clone(st.Ready)
	} else {
		for w, n := range r.minReady {
			r.minReady[w] = min(n, st.Ready[w]) // absent: 0
		}
		for w := range st.Ready {
			if _, seen := r.minReady[w]; !seen {
				r.minReady[w] = 0 // absent from the earlier samples
			}
		}
	}
	for _, d := range st.DoubleBooked {
		if !slices.Contains(r.doubleBooked, d) {
			r.doubleBooked = append(r.doubleBooked, d)
		}
	}
	return nil
}

func (r *runner) play(ctx context.Context) (*report.Report, error) {
	sc := r.o.Scenario
	end := sc.Start.Add(sc.EndOffset().Duration())
	next := 0
	for {
		if err := r.settle(ctx); err != nil {
			return nil, err
		}
		now := r.clk.Now()
		for next < len(sc.Events) && !sc.Start.Add(sc.Events[next].At.Duration()).After(now) {
			if err := r.do(ctx, sc.Events[next]); err != nil {
				return nil, fmt.Errorf("events at +%s: %w", sc.Events[next].At, err)
			}
			next++
			r.c.Watch.Touch()
			if err := r.settle(ctx); err != nil {
				return nil, err
			}
		}
		target, why := end, "end"
		if next < len(sc.Events) {
			target, why = sc.Start.Add(sc.Events[next].At.Duration()), "event"
		}
		if t, ok := r.clk.Next(); ok && t.Before(target) {
			target, why = t, "timer"
		}
		klog.FromContext(ctx).V(3).Info("Advancing the clock", "from", now, "to", target, "next", why)
		if !target.After(now) {
			if now.Before(end) || next < len(sc.Events) {
				continue
			}
			break
		}
		if target.After(end) {
			break
		}
		r.clk.SetTime(target)
		r.c.Watch.Touch()
	}
	return r.finish(end)
}

func (r *runner) do(ctx context.Context, ev scenario.Event) error {
	a := r.c.Applier
	switch {
	case len(ev.Apply) > 0:
		for i := range ev.Apply {
			if err := a.Apply(ctx, &ev.Apply[i], false); err != nil {
				return err
			}
		}
	case ev.ApplyFile != "":
		return a.ApplyFile(ctx, filepath.Join(r.o.Scenario.Dir, ev.ApplyFile))
	case len(ev.Delete) > 0:
		for _, d := range ev.Delete {
			gv, err := schema.ParseGroupVersion(d.APIVersion)
			if err != nil {
				return fmt.Errorf("delete %s: apiVersion: %w", d.Name, err)
			}
			if d.APIVersion == "" {
				gv = schema.GroupVersion{Version: "v1"}
			}
			if err := a.Delete(ctx, gv.WithKind(d.Kind), d.Namespace, d.Name, d.GracePeriodSeconds); err != nil {
				return err
			}
		}
	case ev.Fault != nil:
		n := r.c.Node(ev.Fault.Node)
		xid := ev.Fault.XID
		if xid == 0 {
			xid = 79
		}
		if err := n.InjectXID(ev.Fault.GPU, xid); err != nil {
			return err
		}
		return r.waitTaint(ctx, ev.Fault.Node, ev.Fault.GPU, true)
	case ev.Recover != nil:
		if err := r.c.Node(ev.Recover.Node).Recover(ev.Recover.GPU); err != nil {
			return err
		}
		return r.waitTaint(ctx, ev.Recover.Node, ev.Recover.GPU, false)
	case ev.Checkpoint != nil:
		if err := r.checkpoint(ev.Checkpoint); err != nil {
			return err
		}
		if r.o.Observe != nil {
			return r.o.Observe(ctx, r.c, r.clk.Now())
		}
	}
	return nil
}

// waitTaint waits (real time) until the plugin's health monitor has
// published the device as tainted (or not).
func (r *runner) waitTaint(ctx context.Context, node string, index int, tainted bool) error {
	key := fmt.Sprintf("%s/gpu-%d", node, index)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		st, err := report.Capture(r.c.Watch)
		if err != nil {
			return err
		}
		if g, ok := st.GPUs[key]; ok && (len(g.Taints) > 0) == tainted {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return fmt.Errorf("GPU %s: the driver did not publish the health change within 30s", key)
}

func (r *runner) checkpoint(cp *scenario.Checkpoint) error {
	st := r.lastState
	sc := r.o.Scenario
	transitions := r.log.Transitions()
	var since []report.Transition
	var prev time.Time
	if n := len(r.checkpoints); n > 0 {
		prev = r.checkpoints[n-1].Time
	}
	for _, t := range transitions {
		if (len(r.checkpoints) == 0 || t.At.After(prev)) && !t.At.After(r.clk.Now()) {
			since = append(since, t)
		}
	}
	failures := report.Check(cp.Expect, st, report.History{
		Transitions: len(transitions), MaxGPUsInUse: r.maxInUse, MinReady: r.minReady, DoubleBooked: r.doubleBooked,
	})
	// The next interval starts with this sample.
	r.minReady, r.doubleBooked = maps.Clone(st.Ready), slices.Clone(st.DoubleBooked)
	now := r.clk.Now()
	r.checkpoints = append(r.checkpoints, report.Checkpoint{
		Name: cp.Name, Time: now, Offset: scenario.Offset(now.Sub(sc.Start)).String(),
		Pods: nonNil(st.Pods), Targets: nonNil(st.Targets), Reservations: nonNil(st.Reservations), Quotas: st.Quotas,
		Transitions: nonNil(since), GPUsInUse: st.GPUsInUse(), Failures: nonNil(failures), Passed: len(failures) == 0,
	})
	verdict := "as expected"
	if len(failures) > 0 {
		verdict = fmt.Sprintf("%d expectation(s) not met", len(failures))
	}
	r.progress.printf("%s: %s checkpoint %q: %d GPU(s) in use, %s", sc.Name, now.Format(progressTime), cp.Name, st.GPUsInUse(), verdict)
	return nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func (r *runner) finish(end time.Time) (*report.Report, error) {
	sc := r.o.Scenario
	rep := &report.Report{
		SchemaVersion: report.SchemaVersion, Scenario: sc.Name, Start: sc.Start, End: end,
		Checkpoints: nonNil(r.checkpoints), Transitions: nonNil(r.log.Transitions()), MaxGPUsInUse: r.maxInUse, Passed: true,
	}
	for _, n := range r.c.Nodes {
		rn := report.Node{Name: n.Name, Profile: n.Profile, GPUs: []report.GPU{}}
		for _, row := range r.rec.Rows(end) {
			if row.GPU.Node == n.Name {
				rn.GPUs = append(rn.GPUs, row.GPU)
			}
		}
		rep.Nodes = append(rep.Nodes, rn)
	}
	for _, cp := range r.checkpoints {
		rep.Passed = rep.Passed && cp.Passed
	}
	if r.o.Timeline != "" {
		if err := r.writeTimeline(rep, end); err != nil {
			return nil, err
		}
		rep.Timeline = r.o.Timeline
	}
	return rep, nil
}

func (r *runner) writeTimeline(rep *report.Report, end time.Time) error {
	sc := r.o.Scenario
	page := timeline.Page{Title: "Rota sandbox: " + sc.Name, Start: sc.Start, End: end, Rows: r.rec.Rows(end), Transitions: rep.Transitions}
	for _, cp := range rep.Checkpoints {
		page.Checkpoints = append(page.Checkpoints, timeline.Mark{Label: cp.Name, At: cp.Time})
	}
	if n := len(rep.Checkpoints); n > 0 {
		for _, p := range rep.Checkpoints[n-1].Pods {
			if p.Waiting != nil {
				page.Waiting = append(page.Waiting, p)
			}
		}
	}
	bands, err := r.windows(sc.Start, end)
	if err != nil {
		return err
	}
	page.Windows = bands
	if err := os.MkdirAll(filepath.Dir(r.o.Timeline), 0o750); err != nil {
		return fmt.Errorf("timeline directory: %w", err)
	}
	f, err := os.Create(r.o.Timeline)
	if err != nil {
		return fmt.Errorf("writing the timeline: %w", err)
	}
	err = timeline.Render(f, page)
	return errors.Join(err, f.Close())
}

// windows are the active spans of every DeploySchedule window in the run.
func (r *runner) windows(from, to time.Time) ([]timeline.Band, error) {
	objs, err := r.c.Watch.Schedules.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	var bands []timeline.Band
	for _, obj := range objs {
		var ds v1alpha1.DeploySchedule
		if err := fromObject(obj, &ds); err != nil {
			return nil, err
		}
		s, err := schedule.Compile(&ds)
		if err != nil {
			continue // reported by the controller as InvalidSchedule
		}
		for i := range s.NumWindows() {
			spans, err := s.ActiveSpans(i, from, to)
			if err != nil {
				return nil, err
			}
			for _, sp := range spans {
				bands = append(bands, timeline.Band{Label: ds.Name + ": " + ds.Spec.Windows[i].Name, From: sp.Start, To: sp.End})
			}
		}
	}
	return bands, nil
}
