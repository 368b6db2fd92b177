package schedule

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// the multi-replica scenario (docs/design.md#scenario-multi-replica): 2 nodes × 8 GPUs; llama70b (8 GPUs per replica) runs 2 replicas in
// business hours and 1 outside; md-qwen-8gpu takes the node llama70b's second
// replica frees. llama70b never goes to zero.
func TestMultiReplicaSwap(t *testing.T) {
	e := newEnv(t, at(19, 7, 0), map[string]int{"gpu-node-a": 8, "gpu-node-b": 8})
	obs := startObserver(t, e.cp.Client, ns)
	e.gpuDeployment("md-llama70b", 1, 8)
	e.gpuDeployment("md-qwen-8gpu", 1, 8)
	// llama70b serves an alias; a scale-down that keeps one replica needs no consent.
	if _, err := e.cp.Client.CoreV1().Services(ns).Create(e.ctx, &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "chat"},
		Spec:       v1.ServiceSpec{Selector: map[string]string{"app": "md-llama70b"}, Ports: []v1.ServicePort{{Port: 80}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitReady("md-llama70b", 1)
	e.waitReady("md-qwen-8gpu", 1)
	e.createSchedule(readExample(t, "deployschedule-multireplica.yaml"))
	e.startController(nil)
	const name = "gpu-pool-h100-multireplica"
	e.convergedSince(name, at(19, 7, 0), 50)

	// 08:00: stop md-qwen-8gpu, then scale llama70b 1 -> 2.
	e.clock.SetTime(at(19, 8, 0))
	e.convergedSince(name, at(19, 8, 0), 400)
	if r := ptr.Deref(e.deployment("md-llama70b").Spec.Replicas, 1); r != 2 {
		t.Fatalf("08:00: llama70b replicas %d, want 2", r)
	}
	if r := ptr.Deref(e.deployment("md-qwen-8gpu").Spec.Replicas, 1); r != 0 {
		t.Fatalf("08:00: md-qwen-8gpu replicas %d, want 0", r)
	}
	nodes := e.podNodes("md-llama70b")
	// 18:00: scale llama70b 2 -> 1, then start md-qwen-8gpu on the freed node.
	e.clock.SetTime(at(19, 18, 0))
	e.convergedSince(name, at(19, 18, 0), 400)
	left := e.podNodes("md-llama70b")
	qwen := e.podNodes("md-qwen-8gpu")
	if len(left) != 1 || len(qwen) != 1 {
		t.Fatalf("18:00: llama70b on %v, md-qwen-8gpu on %v; want one pod each", left, qwen)
	}
	var freed string
	for n := range nodes {
		if _, still := left[n]; !still {
			freed = n
		}
	}
	if _, ok := qwen[freed]; !ok {
		t.Errorf("md-qwen-8gpu runs on %v, want the node llama70b's second replica freed (%s)", qwen, freed)
	}
	if !e.sawEvent(name, "CapacityReduced") {
		t.Errorf("no CapacityReduced event for the scale-down")
	}
	// 08:00 Tuesday reverses it.
	e.clock.SetTime(at(20, 8, 0))
	e.convergedSince(name, at(20, 8, 0), 400)
	if r := ptr.Deref(e.deployment("md-llama70b").Spec.Replicas, 1); r != 2 {
		t.Fatalf("Tue 08:00: llama70b replicas %d, want 2", r)
	}

	// No downtime: from the first ready llama70b pod on, one always existed,
	// and llama70b's Deployment never asked for zero.
	started := false
	obs.replay(func(s *clusterState, r observation) {
		pods, _ := s.podsOf("md-llama70b")
		if started && pods == 0 {
			t.Errorf("llama70b had no pod at rv %d (%s)", r.rv, r)
			started = false
		}
		if pods > 0 && !started && s.replicas["md-llama70b"] > 0 {
			started = true
		}
		if r.kind == "deployment" && r.name == "md-llama70b" && r.replicas == 0 {
			t.Errorf("llama70b scaled to zero at rv %d", r.rv)
		}
		if g := s.gpus(); g > 16 {
			t.Errorf("%d GPUs allocated, pool has 16", g)
		}
	})
}

// podNodes returns the nodes the app's pods are bound to.
func (e *env) podNodes(app string) map[string]bool {
	pods, err := e.cp.Client.CoreV1().Pods(ns).List(e.ctx, metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]bool{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Spec.NodeName != "" {
			out[p.Spec.NodeName] = true
		}
	}
	return out
}

// sawEvent reports whether an Event with reason was recorded on the schedule.
func (e *env) sawEvent(schedule, reason string) bool {
	var found bool
	e.advance("event "+reason, 20, func() (bool, string) {
		events, err := e.cp.Client.CoreV1().Events(ns).List(e.ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, ev := range events.Items {
			if ev.InvolvedObject.Name == schedule && ev.Reason == reason {
				found = true
			}
			seen = append(seen, ev.Reason)
		}
		return found, strings.Join(seen, ",")
	})
	return found
}
