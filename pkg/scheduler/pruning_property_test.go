package scheduler

import (
	"context"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/component-base/metrics/legacyregistry"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/plugins/tiering"
	"github.com/rota-dev/rota/pkg/waits"
)

// TestPruningKeepsPlacements is the property test of tier-aware pruning
// (docs/tiering.md, "Pruning"): over random clusters — GPU models mixed on
// and across nodes, CPU skewed so that NodeResourcesFit rejects some nodes,
// node taints, GPUs held by GPUReservations (their rota.dev/reserved
// taint) or unhealthy, GPUs already allocated, pools published in two
// slices or incomplete (not rankable by counting) — the shipped profile
// with pruning and the same profile with disablePruning place a sequence
// of tiered pods identically: the same node and devices for each pod, and
// for a pod that fits nowhere the same PodScheduled message. Every placed
// pod is placed in its first attempt in both runs (no failed attempt, so
// no backoff, even when its best tier was free but blocked by another
// filter). The pruned run must have pruned nodes, or the test proves
// nothing.
func TestPruningKeepsPlacements(t *testing.T) {
	const seeds = 10
	pruned0 := counterValue(t, "rota_tiering_pruned_nodes_total", nil)
	fallbacks := 0
	for seed := range uint64(seeds) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			c := randomCluster(seed)
			on := c.run(t, false)
			off := c.run(t, true)
			for i, want := range off {
				got := on[i]
				if got != want {
					t.Errorf("pod %d (%s): with pruning %s; without %s", i, c.pods[i], got, want)
				}
				if got.failedBefore {
					t.Errorf("pod %d (%s) placed after a failed attempt", i, c.pods[i])
				}
				if got.fellBack {
					fallbacks++
				}
			}
		})
	}
	pruned := counterValue(t, "rota_tiering_pruned_nodes_total", nil) - pruned0
	t.Logf("%d nodes pruned, %d placements on a tier below a free but filtered-out better one", int(pruned), fallbacks)
	if pruned == 0 {
		t.Error("no node was pruned: the clusters do not exercise pruning")
	}
	if fallbacks == 0 {
		t.Error("no pod fell back past a free tier another filter rejected: the clusters do not exercise the fallback")
	}
}

// TestPruningFallsBackInOneAttempt: both H100 nodes have a free H100 but
// too little CPU; the pod asking "H100 else A100" takes the A100 node in
// its first attempt, the L4 node never reaching the other filters, and
// the placement event names the passed-over H100 tier as without pruning.
func TestPruningFallsBackInOneAttempt(t *testing.T) {
	c := &propCluster{
		nodes: []propNode{
			{name: "h100-0", cpu: 1, gpus: []propGPU{{model: "H100"}, {model: "H100"}}},
			{name: "h100-1", cpu: 1, gpus: []propGPU{{model: "H100"}}},
			{name: "a100-0", cpu: 16, gpus: []propGPU{{model: "A100"}, {model: "A100"}}},
			{name: "a100-1", cpu: 16, gpus: []propGPU{{model: "A100"}}},
			{name: "l4-0", cpu: 16, gpus: []propGPU{{model: "L4"}}},
		},
		pods: []propPod{{models: []string{"H100", "A100"}, count: 1, cpuMilli: 4000}},
	}
	pruned0 := counterValue(t, "rota_tiering_pruned_nodes_total", nil)
	on := c.run(t, false)
	pruned := counterValue(t, "rota_tiering_pruned_nodes_total", nil) - pruned0
	off := c.run(t, true)
	want := placed{node: "a100-1", devices: "a100-1/gpu-0", fellBack: true, note: on[0].note}
	if on[0] != want {
		t.Errorf("with pruning: %s, want %s", on[0], want)
	}
	if !strings.Contains(on[0].note, "H100 tier: 3 of 3 free") {
		t.Errorf("placement note %q does not explain the passed-over H100 tier", on[0].note)
	}
	if on[0] != off[0] {
		t.Errorf("with pruning %s; without %s", on[0], off[0])
	}
	if pruned != 1 {
		t.Errorf("%v nodes pruned, want 1 (l4-0)", pruned)
	}
}

// propGPU is one GPU of a random cluster.
type propGPU struct {
	model string
	// reservedBy puts a GPUReservation's taint on it; unhealthy the
	// driver's taint; allocated gives it to a claim of another tenant.
	reservedBy           string
	unhealthy, allocated bool
}

type propNode struct {
	name string
	cpu  int64
	// tainted puts a NoSchedule taint on the node, which no pod tolerates.
	tainted bool
	gpus    []propGPU
	// split publishes the GPUs in two slices of one pool; incomplete
	// announces a second slice that never comes (the pool cannot be
	// ranked by counting).
	split, incomplete bool
}

type propPod struct {
	models   []string
	count    int64
	cpuMilli int64
}

func (p propPod) String() string {
	return fmt.Sprintf("%d × %s, %dm CPU", p.count, strings.Join(p.models, " else "), p.cpuMilli)
}

type propCluster struct {
	nodes []propNode
	pods  []propPod
}

var propModels = []string{"H100", "A100", "L4"}

// randomCluster builds the cluster and pods of one seed.
func randomCluster(seed uint64) *propCluster {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	c := &propCluster{}
	for i := range 6 + r.IntN(7) {
		n := propNode{
			name:       fmt.Sprintf("node-%02d", i),
			cpu:        []int64{1, 2, 4, 16}[r.IntN(4)],
			tainted:    r.IntN(8) == 0,
			split:      r.IntN(5) == 0,
			incomplete: r.IntN(8) == 0,
		}
		mixed := r.IntN(6) == 0
		model := propModels[r.IntN(len(propModels))]
		for range 1 + r.IntN(4) {
			g := propGPU{model: model}
			if mixed {
				g.model = propModels[r.IntN(len(propModels))]
			}
			switch r.IntN(10) {
			case 0:
				g.reservedBy = "team-r.hold"
			case 1:
				g.unhealthy = true
			case 2, 3:
				g.allocated = true
			}
			n.gpus = append(n.gpus, g)
		}
		c.nodes = append(c.nodes, n)
	}
	for range 6 + r.IntN(7) {
		models := slices.Clone(propModels)
		r.Shuffle(len(models), func(i, j int) { models[i], models[j] = models[j], models[i] })
		c.pods = append(c.pods, propPod{
			models:   models[:1+r.IntN(len(models))],
			count:    int64(1 + r.IntN(2)),
			cpuMilli: []int64{500, 1500, 3000}[r.IntN(3)],
		})
	}
	return c
}

// placed is one pod's outcome.
type placed struct {
	node, devices string
	// message is the PodScheduled message of a pod that fits nowhere.
	message string
	// note is the TieredPlacement event's note.
	note string
	// fellBack is true when the pod got a lower tier while a better
	// tier's devices were free somewhere (another filter rejected them).
	fellBack bool
	// failedBefore is true when a placed pod had a failed attempt first
	// (a PodScheduled=False or Waiting condition).
	failedBefore bool
}

func (p placed) String() string {
	if p.node == "" {
		return fmt.Sprintf("unplaced (%q)", p.message)
	}
	return fmt.Sprintf("%s %s (%q, failed before: %t)", p.node, p.devices, p.note, p.failedBefore)
}

// run starts the shipped profile (pruning off when disabled) on a fresh
// fake cluster holding c and creates c's pods one at a time, each once
// the one before is placed or found unplaceable (then deleted).
func (c *propCluster) run(t *testing.T, disablePruning bool) []placed {
	t.Helper()
	ctx := testContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cluster := newFakeCluster(t)
	if err := cluster.create(ctx, c.objects()...); err != nil {
		t.Fatal(err)
	}
	cfg := shippedConfig(t)
	setTieringArgs(t, cfg, &tiering.TieringArgs{PolicyVersion: "tiering-v1", DisablePruning: disablePruning})
	startScheduler(ctx, t, cluster, cfg)

	out := make([]placed, len(c.pods))
	for i, p := range c.pods {
		pod, claim := p.objects(fmt.Sprintf("pod-%02d", i))
		if err := cluster.create(ctx, claim, pod); err != nil {
			t.Fatal(err)
		}
		out[i] = waitPlaced(ctx, t, cluster, pod, claim)
		out[i].fellBack = fellBack(out[i].note, p.count)
		if out[i].node == "" {
			// Unplaceable: out of the way, so that its retries do not
			// interleave with the next pod's attempts.
			if err := cluster.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	return out
}

// passedTierLine is a passed-over tier in a placement note.
var passedTierLine = regexp.MustCompile(`tier: (\d+) of \d+ free(, at most)?`)

// fellBack reports whether a placement note names a passed-over tier with
// enough free devices on one node for the pod: another filter, not the
// devices, kept the pod off it.
func fellBack(note string, count int64) bool {
	for _, m := range passedTierLine.FindAllStringSubmatch(note, -1) {
		if free, _ := strconv.ParseInt(m[1], 10, 64); free >= count && m[2] == "" {
			return true
		}
	}
	return false
}

// setTieringArgs replaces the profile's Tiering args.
func setTieringArgs(t *testing.T, cfg *schedconfig.KubeSchedulerConfiguration, args *tiering.TieringArgs) {
	t.Helper()
	for i := range cfg.Profiles {
		for j := range cfg.Profiles[i].PluginConfig {
			if cfg.Profiles[i].PluginConfig[j].Name == tiering.Name {
				cfg.Profiles[i].PluginConfig[j].Args = args
				return
			}
		}
	}
	t.Fatal("the shipped profile has no Tiering args")
}

// waitPlaced waits until pod is bound, or has been found unplaceable, and
// returns the outcome. The deadline only guards against a hang.
func waitPlaced(ctx context.Context, t *testing.T, c *fakeCluster, pod *v1.Pod, claim *resourceapi.ResourceClaim) placed {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	var out placed
	err := wait.PollUntilContextCancel(ctx, 5*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		p, err := c.client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if p.Spec.NodeName == "" {
			for _, cond := range p.Status.Conditions {
				if cond.Type == v1.PodScheduled && cond.Status == v1.ConditionFalse {
					out.message = cond.Message
					return true, nil
				}
			}
			return false, nil
		}
		note := placementNote(ctx, c, p)
		if note == "" {
			return false, nil // the event is on its way
		}
		cl, err := c.client.ResourceV1().ResourceClaims(claim.Namespace).Get(ctx, claim.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if cl.Status.Allocation == nil {
			return false, nil
		}
		var devs []string
		for _, r := range cl.Status.Allocation.Devices.Results {
			devs = append(devs, r.Pool+"/"+r.Device)
		}
		out = placed{node: p.Spec.NodeName, devices: strings.Join(devs, ","), note: note, failedBefore: waiting(p)}
		for _, cond := range p.Status.Conditions {
			if cond.Type == v1.PodScheduled && cond.Status == v1.ConditionFalse {
				out.failedBefore = true
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("pod %s: neither placed nor found unplaceable: %v", pod.Name, err)
	}
	return out
}

// waiting reports whether the pod carries Rota's Waiting condition, true.
func waiting(pod *v1.Pod) bool {
	c := waits.Current(pod)
	return c != nil && c.Status == v1.ConditionTrue
}

// placementNote is the note of the pod's TieredPlacement event, "" until
// it is recorded.
func placementNote(ctx context.Context, c *fakeCluster, pod *v1.Pod) string {
	events, err := c.client.EventsV1().Events(pod.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return ""
	}
	for _, e := range events.Items {
		if e.Regarding.Name == pod.Name && e.Reason == "TieredPlacement" {
			return e.Note
		}
	}
	return ""
}

// counterValue sums the samples of a counter in the process's legacy
// registry whose labels include labels.
func counterValue(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			for k, v := range labels {
				found := false
				for _, l := range m.GetLabel() {
					if l.GetName() == k && l.GetValue() == v {
						found = true
					}
				}
				if !found {
					continue metrics
				}
			}
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

// objects are the cluster's nodes, slices, device class and the claims
// holding its allocated GPUs.
func (c *propCluster) objects() []runtime.Object {
	objs := []runtime.Object{gpuClass()}
	for _, n := range c.nodes {
		objs = append(objs, n.node())
		objs = append(objs, n.slices()...)
		for i, g := range n.gpus {
			if !g.allocated {
				continue
			}
			objs = append(objs, &resourceapi.ResourceClaim{
				ObjectMeta: metav1.ObjectMeta{Namespace: "busy", Name: fmt.Sprintf("%s-gpu-%d", n.name, i)},
				Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
					Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: gpuv1.DeviceClassName},
				}}}},
				Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
					Results: []resourceapi.DeviceRequestAllocationResult{{Request: "gpu", Driver: gpuv1.DriverName, Pool: n.name, Device: fmt.Sprintf("gpu-%d", i)}},
				}}},
			})
		}
	}
	return objs
}

func (n propNode) node() *v1.Node {
	capacity := v1.ResourceList{v1.ResourcePods: resource.MustParse("110"), v1.ResourceCPU: *resource.NewQuantity(n.cpu, resource.DecimalSI), v1.ResourceMemory: resource.MustParse("512Gi")}
	node := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.name, Labels: map[string]string{"kubernetes.io/hostname": n.name}},
		Status: v1.NodeStatus{Capacity: capacity, Allocatable: capacity,
			Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}},
	}
	if n.tainted {
		node.Spec.Taints = []v1.Taint{{Key: "example.com/maintenance", Effect: v1.TaintEffectNoSchedule}}
	}
	return node
}

// slices publishes the node's GPUs as Rota's driver does, in one slice, or
// two when split; an incomplete pool announces one slice more.
func (n propNode) slices() []runtime.Object {
	parts := 1
	if n.split && len(n.gpus) > 1 {
		parts = 2
	}
	count := int64(parts)
	if n.incomplete {
		count++
	}
	var out []runtime.Object
	for p := range parts {
		slice := &resourceapi.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%s-%d", n.name, gpuv1.DriverName, p)},
			Spec: resourceapi.ResourceSliceSpec{
				Driver: gpuv1.DriverName, NodeName: ptr.To(n.name),
				Pool: resourceapi.ResourcePool{Name: n.name, ResourceSliceCount: count},
			},
		}
		for i, g := range n.gpus {
			if i%parts != p {
				continue
			}
			d := resourceapi.Device{
				Name: fmt.Sprintf("gpu-%d", i),
				Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
					"model": {StringValue: ptr.To(g.model)},
					"uuid":  {StringValue: ptr.To(fmt.Sprintf("GPU-%s-%d", n.name, i))},
				},
			}
			if g.reservedBy != "" {
				d.Taints = append(d.Taints, resourceapi.DeviceTaint{Key: gpuv1.ReservedTaintKey, Value: g.reservedBy, Effect: resourceapi.DeviceTaintEffectNoSchedule})
			}
			if g.unhealthy {
				d.Taints = append(d.Taints, resourceapi.DeviceTaint{Key: gpuv1.DriverName + "/unhealthy", Effect: resourceapi.DeviceTaintEffectNoSchedule})
			}
			slice.Spec.Devices = append(slice.Spec.Devices, d)
		}
		out = append(out, slice)
	}
	return out
}

// objects are the pod and its claim "<name>-gpu": count GPUs of the first
// of the models that can be had.
func (p propPod) objects(name string) (*v1.Pod, *resourceapi.ResourceClaim) {
	pod, claim := tieredGPUPod("prop", name, p.models...)
	for i := range claim.Spec.Devices.Requests[0].FirstAvailable {
		claim.Spec.Devices.Requests[0].FirstAvailable[i].Count = p.count
	}
	pod.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: *resource.NewMilliQuantity(p.cpuMilli, resource.DecimalSI)}
	return pod, claim
}
