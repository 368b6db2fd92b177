package schedule

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/test/integration/framework"
)

// readExample returns a DeploySchedule shipped in examples/.
func readExample(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(framework.RepoRoot(t), "examples", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// waitReady advances the clock until the Deployment has ready replicas.
func (e *env) waitReady(name string, replicas int32) {
	e.t.Helper()
	e.advance(name+" ready", 100, func() (bool, string) {
		d := e.deployment(name)
		return d.Status.ReadyReplicas == replicas && ptr.Deref(d.Spec.Replicas, 1) == replicas,
			"ready " + itoa(d.Status.ReadyReplicas)
	})
}

// the week-swap scenario (docs/design.md#scenario-week-swap): the week of Mon 2026-10-19 on a pool of 10 GPUs.
func TestWeekSwap(t *testing.T) {
	e := newEnv(t, at(19, 0, 0), map[string]int{"gpu-node-0": 10})
	obs := startObserver(t, e.cp.Client, ns)
	e.gpuDeployment("md-llama70b", 0, 8)
	e.gpuDeployment("md-qwen32b", 1, 6)
	e.gpuDeployment("md-bge-embed", 1, 2)
	// llama70b serves the "chat" alias: stopping it needs the consent the
	// schedule gives (defaultAllowDowntime, maint-wed's allowDowntime).
	if _, err := e.cp.Client.CoreV1().Services(ns).Create(e.ctx, &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "chat"},
		Spec:       v1.ServiceSpec{Selector: map[string]string{"app": "md-llama70b"}, Ports: []v1.ServicePort{{Port: 80}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitReady("md-qwen32b", 1)
	e.waitReady("md-bge-embed", 1)
	bgePods := e.podNames("md-bge-embed")

	e.createSchedule(readExample(t, "deployschedule-week.yaml"))
	e.startController(nil)
	e.convergedSince("gpu-pool-h100-shared", at(19, 0, 0), 50)

	type boundary struct {
		at          time.Time
		llama, qwen int32
		source      string
	}
	var boundaries []boundary
	for day := 19; day <= 23; day++ {
		boundaries = append(boundaries, boundary{at(day, 8, 0), 1, 0, "business-hours"})
		if day == 21 {
			boundaries = append(boundaries,
				boundary{at(21, 13, 0), 0, 1, "maint-wed"},
				boundary{at(21, 15, 0), 1, 0, "business-hours"})
		}
		boundaries = append(boundaries, boundary{at(day, 18, 0), 0, 1, "default"})
	}
	for _, b := range boundaries {
		e.clock.SetTime(b.at)
		e.convergedSince("gpu-pool-h100-shared", b.at, 400)
		if l, q := ptr.Deref(e.deployment("md-llama70b").Spec.Replicas, 1), ptr.Deref(e.deployment("md-qwen32b").Spec.Replicas, 1); l != b.llama || q != b.qwen {
			t.Fatalf("%s: llama70b %d qwen32b %d, want %d %d", b.at.Format(time.RFC3339), l, q, b.llama, b.qwen)
		}
		lag := e.clock.Now().Sub(b.at)
		t.Logf("%s %s: converged after %s of virtual time", b.at.Format("Mon 15:04"), b.source, lag)
		if st := e.targetStatus("gpu-pool-h100-shared", "llama70b"); st.Desired == nil || st.Desired.Source != b.source {
			t.Errorf("%s: llama70b source %+v, want %s", b.at, st.Desired, b.source)
		}
	}
	// Friday 18:00 to Monday 08:00 runs on defaults, with nothing to do.
	writesBefore := obs.deploymentChanges()
	for _, when := range []time.Time{at(24, 12, 0), at(25, 12, 0), at(26, 0, 0)} {
		e.clock.SetTime(when)
		e.tick(4)
		for _, target := range []string{"llama70b", "qwen32b"} {
			st := e.targetStatus("gpu-pool-h100-shared", target)
			if st.Desired == nil || st.Desired.Source != "default" || st.Phase != v1alpha1.TargetPhaseConverged {
				t.Errorf("%s %s: %s/%s desired %+v, want Converged on the default", when.Format(time.RFC3339), target, st.Phase, st.Reason, st.Desired)
			}
		}
	}
	if got := obs.deploymentChanges(); got != writesBefore {
		t.Errorf("the weekend changed workloads: %d deployment changes, want %d", got, writesBefore)
	}

	// What the watches saw, in etcd revision order.
	maxGPUs, starts := 0, map[string]int{}
	obs.replay(func(s *clusterState, r observation) {
		if g := s.gpus(); g > maxGPUs {
			maxGPUs = g
		}
		if r.kind != "deployment" {
			return
		}
		prev, seen := s.replicas[r.name]
		if r.name == "md-bge-embed" && seen && prev != r.replicas {
			t.Errorf("md-bge-embed scaled %d -> %d", prev, r.replicas)
		}
		if !seen || prev != 0 || r.replicas == 0 {
			return
		}
		starts[r.name]++
		other := map[string]string{"md-llama70b": "md-qwen32b", "md-qwen32b": "md-llama70b"}[r.name]
		if pods, devices := s.podsOf(other); pods != 0 || devices != 0 {
			t.Errorf("%s started at rv %d while %s still had %d pods and %d allocated GPUs", r.name, r.rv, other, pods, devices)
		}
	})
	if maxGPUs > 10 {
		t.Errorf("GPUs in use peaked at %d, want at most 10", maxGPUs)
	}
	if starts["md-llama70b"] != 6 || starts["md-qwen32b"] != 6 {
		t.Errorf("starts = %v, want 6 each (5 mornings + Wed 15:00; 5 evenings + Wed 13:00)", starts)
	}
	if got := e.podNames("md-bge-embed"); len(got) != 1 || got[0] != bgePods[0] {
		t.Errorf("md-bge-embed pods changed: %v -> %v", bgePods, got)
	}
	if d := e.deployment("md-bge-embed"); d.Annotations["rota.dev/transition-key"] != "" || d.Generation != 1 {
		t.Errorf("md-bge-embed was written: generation %d annotations %v", d.Generation, d.Annotations)
	}
	t.Logf("peak GPUs in use: %d of 10", maxGPUs)
}

func (e *env) podNames(app string) []string {
	pods, err := e.cp.Client.CoreV1().Pods(ns).List(e.ctx, metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, p := range pods.Items {
		out = append(out, p.Name)
	}
	return out
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }
