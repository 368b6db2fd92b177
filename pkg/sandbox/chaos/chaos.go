// Package chaos runs Rota's components as separate OS processes against the
// sandbox's control plane, SIGKILLs them at seeded random moments while a
// workload mix plays, and checks Rota's invariants all along
// (docs/reliability.md, "Chaos").
package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"

	"github.com/rota-dev/rota/pkg/sandbox/cluster"
	"github.com/rota-dev/rota/pkg/sim/vclock"
)

// Leader election of the replicas: short, so that a killed leader's lease
// passes to the other replica within seconds.
const (
	leaseDuration = 4 * time.Second
	renewDeadline = 3 * time.Second
	retryPeriod   = 500 * time.Millisecond
	// pollEvery is the invariant checker's period.
	pollEvery = 300 * time.Millisecond
)

type runner struct {
	o        Options
	c        *cluster.Cluster
	logDir   string
	nodes    []*node
	procs    []*proc
	cleanups []func()
	tally    *tally
	trans    *transitions
	stats    *stats

	scheduleApplied time.Time
	// judgeUntil: boundaries after it are not judged (the teardown).
	mu          sync.Mutex
	judgeUntil  time.Time
	restartedAt map[*node]time.Time
}

// Run carries out a chaos run and returns its report. An error means the
// run could not be carried out; broken invariants are in the report.
func Run(ctx context.Context, o Options) (*Report, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	started := time.Now()
	logger := klog.FromContext(ctx)
	r := &runner{o: o, logDir: filepath.Join(o.Dir, "logs"), tally: newTally(), stats: newStats(), restartedAt: map[*node]time.Time{}}
	r.trans = newTransitions(r.tally)
	r.judgeUntil = time.Now().Add(24 * time.Hour)
	if err := os.MkdirAll(r.logDir, 0o750); err != nil {
		return nil, fmt.Errorf("log directory: %w", err)
	}
	for _, b := range []string{"scheduler", "schedule-controller", "dra-kubelet-plugin"} {
		if _, err := os.Stat(filepath.Join(o.BinDir, b)); err != nil {
			return nil, fmt.Errorf("binary %s: %w (run 'make build')", b, err)
		}
	}
	clusterDir := filepath.Join(o.Dir, "cluster")
	if err := os.RemoveAll(clusterDir); err != nil {
		return nil, err
	}
	c, err := cluster.Start(ctx, cluster.Options{RepoRoot: o.RepoRoot, Dir: clusterDir, Clock: vclock.New(time.Now()), ExternalComponents: true})
	if err != nil {
		return nil, err
	}
	r.c = c
	ctx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel()
		for _, p := range r.procs {
			p.stop()
		}
		for i := len(r.cleanups) - 1; i >= 0; i-- {
			r.cleanups[i]()
		}
		c.Stop()
	}()
	c.Watch.OnChange(r.trans.observe)
	if err := r.startComponents(ctx); err != nil {
		return nil, err
	}
	logger.Info("Components up", "processes", len(r.procs))

	pollCtx, stopPoll := context.WithCancel(ctx)
	pollDone := make(chan struct{})
	go func() {
		defer close(pollDone)
		tick := time.NewTicker(pollEvery)
		defer tick.Stop()
		for {
			select {
			case <-pollCtx.Done():
				return
			case <-tick.C:
				r.pollOnce(pollCtx)
			}
		}
	}()
	defer func() { stopPoll(); <-pollDone }()

	if err := r.applyWorkloads(ctx); err != nil {
		return nil, err
	}
	workCtx, stopWork := context.WithCancel(ctx)
	var work sync.WaitGroup
	work.Go(func() { r.churn(workCtx) })
	work.Go(func() { r.faults(workCtx) })

	killStart := time.Now()
	if err := r.inject(ctx); err != nil {
		stopWork()
		work.Wait()
		return nil, err
	}
	killPhase := time.Since(killStart)
	stopWork()
	work.Wait()

	r.settle(ctx)
	stopPoll()
	<-pollDone
	r.pollOnce(ctx) // once more, after things settled
	r.checkOrphans(ctx, false)
	r.mu.Lock()
	r.judgeUntil = time.Now()
	r.mu.Unlock()
	r.teardown(ctx)
	r.checkOrphans(ctx, true)

	rep := r.report(started, killPhase)
	return rep, nil
}

// startComponents starts the schedulers, the controllers and the nodes.
func (r *runner) startComponents(ctx context.Context) error {
	schedConfig, err := r.schedulerConfig()
	if err != nil {
		return err
	}
	for i := range 2 {
		p := newProc(fmt.Sprintf("scheduler-%d", i), KindScheduler, filepath.Join(r.o.BinDir, "scheduler"), r.logDir,
			"--config="+schedConfig, "--secure-port=0", "-v=1")
		r.procs = append(r.procs, p)
		if err := p.start(ctx); err != nil {
			return err
		}
	}
	for i := range 2 {
		name := fmt.Sprintf("schedule-controller-%d", i)
		p := newProc(name, KindController, filepath.Join(r.o.BinDir, "schedule-controller"), r.logDir,
			"run", "--kubeconfig="+r.c.Kubeconfig, "--namespace="+cluster.GateNamespace, "--identity="+name,
			"--lease-duration="+leaseDuration.String(), "--renew-deadline="+renewDeadline.String(), "--retry-period="+retryPeriod.String(),
			"--metrics-bind-address=", "--health-probe-bind-address=", "--progress-period=1s", "--pass-period=30s", "--forecast-period=-1s")
		r.procs = append(r.procs, p)
		if err := p.start(ctx); err != nil {
			return err
		}
	}
	for _, spec := range r.o.Nodes {
		n, err := r.startNode(ctx, spec)
		if err != nil {
			return err
		}
		r.nodes = append(r.nodes, n)
		r.procs = append(r.procs, n.driver)
	}
	return nil
}

// schedulerConfig is the sandbox's scheduler configuration with leader
// election on and short, for two replicas.
func (r *runner) schedulerConfig() (string, error) {
	data, err := os.ReadFile(r.c.SchedulerConfig)
	if err != nil {
		return "", err
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		return "", fmt.Errorf("scheduler config: %w", err)
	}
	cfg["leaderElection"] = map[string]any{
		"leaderElect": true, "resourceNamespace": cluster.GateNamespace, "resourceName": "rota-scheduler",
		"leaseDuration": leaseDuration.String(), "renewDeadline": renewDeadline.String(), "retryPeriod": retryPeriod.String(),
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		return "", err
	}
	path := filepath.Join(r.o.Dir, "scheduler-chaos.yaml")
	return path, os.WriteFile(path, out, 0o600)
}

// inject sends the planned kills: wait, note what the victim was doing,
// SIGKILL it, start it again after its downtime.
func (r *runner) inject(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	plan := PlanKills(r.o.Seed, r.o.Kills, len(r.procs), r.o.Timing)
	lastProgress := time.Now()
	for i, k := range plan {
		if err := sleep(ctx, k.After); err != nil {
			return err
		}
		p := r.procs[k.Victim]
		work := r.inFlight(ctx, p)
		if !p.kill() {
			// It exited by itself just now; the kill still takes it down
			// for the planned time.
			work = append(work, "already exiting")
		}
		r.stats.mu.Lock()
		r.stats.kills[p.kind]++
		r.stats.killsByComponent[p.name]++
		for _, w := range work {
			r.stats.midWork[w]++
		}
		r.stats.mu.Unlock()
		logger.V(2).Info("Killed", "component", p.name, "kill", i+1, "inFlight", work, "down", k.Down)
		if err := sleep(ctx, k.Down); err != nil {
			return err
		}
		if err := p.start(ctx); err != nil {
			return err
		}
		if p.kind == KindDriver {
			r.driverRestarted(p)
		}
		if r.o.Progress != nil && time.Since(lastProgress) > 10*time.Second {
			lastProgress = time.Now()
			_, violations := r.tally.snapshot()
			fmt.Fprintf(r.o.Progress, "%s kill %d/%d (%s), violations so far: %d\n", time.Now().UTC().Format(time.TimeOnly), i+1, len(plan), p.name, len(violations))
		}
	}
	return nil
}

func (r *runner) driverRestarted(p *proc) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range r.nodes {
		if n.driver == p {
			r.restartedAt[n] = time.Now()
		}
	}
	r.stats.add(&r.stats.driverRestarts, 1)
}

// verifiedAfterRestart counts a driver restart as verified once the
// checkpoint agreed with the kubelet with the restarted driver up for a
// second (its start-up recovery done).
func (r *runner) verifiedAfterRestart(n *node) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.restartedAt[n]; !ok || n.driver.uptime() < time.Second {
		return
	}
	delete(r.restartedAt, n)
	r.stats.add(&r.stats.driverRestartsVerified, 1)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func fromUnstructured(obj runtime.Object, into any) error {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return fmt.Errorf("%T is not unstructured", obj)
	}
	return runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into)
}

func (r *runner) report(started time.Time, killPhase time.Duration) *Report {
	checks, violations := r.tally.snapshot()
	mutations, boundaries := r.trans.counts()
	rep := &Report{
		Seed: r.o.Seed, KillsPlanned: r.o.Kills, Timing: r.o.Timing, Nodes: r.o.Nodes,
		Restarts: map[string]int{}, SelfExits: map[string]int{},
		Checks: checks, Violations: violations, Started: started.UTC(),
		WallSeconds: time.Since(started).Seconds(), KillPhaseSeconds: killPhase.Seconds(),
		TransitionMutations: mutations, BoundariesJudged: boundaries, Dir: r.o.Dir,
	}
	for _, p := range r.procs {
		starts, exits := p.counts()
		rep.Restarts[p.kind] += starts
		rep.SelfExits[p.kind] += exits
	}
	s := r.stats
	s.mu.Lock()
	defer s.mu.Unlock()
	rep.Kills, rep.KillsByComponent, rep.KilledMidWork = s.kills, s.killsByComponent, s.midWork
	rep.GPUFaults, rep.GPURecoveries, rep.PodsCreated, rep.PodsDeleted = s.faults, s.recoveries, s.podsCreated, s.podsDeleted
	rep.DriverRestarts, rep.DriverRestartsVerified = s.driverRestarts, s.driverRestartsVerified
	return rep
}
