package controller

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic/dynamicinformer"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/reservation"
)

// Sizes of the benchmark cluster (docs/benchmarks.md, "Reservation
// controller"): nodes × GPUs, one reservation of benchHeld GPUs on each of
// the first benchReservations nodes (ten per namespace), every other GPU
// allocated to a claim. BenchmarkReservationCurve varies nodes and
// reservations.
const (
	benchNodes        = 1000
	benchGPUsPerNode  = 8
	benchReservations = 500
	benchHeld         = 2
)

// benchSize is a benchmark cluster's nodes and reservations.
type benchSize struct{ nodes, reservations int }

// benchCluster is a controller whose informer caches hold the benchmark
// cluster in its steady state: every reservation synced until a sync
// writes nothing. Informers are not running; the benchmark puts what the
// controller wrote back into their caches itself.
type benchCluster struct {
	ctx    context.Context
	c      *Controller
	inf    Informers
	client *fake.Clientset
	dyn    *dynamicfake.FakeDynamicClient
	keys   []string
	slices []*resourceapi.ResourceSlice
}

func benchNode(i int) string { return fmt.Sprintf("node-%04d", i) }

func newBenchCluster(b *testing.B, size benchSize) *benchCluster {
	b.Helper()
	ctx := klog.NewContext(context.Background(), klog.Background().V(10)) // quiet
	var resObjs []runtime.Object
	var keys []string
	for i := range size.reservations {
		res := &rotav1.GPUReservation{
			TypeMeta:   metav1.TypeMeta{APIVersion: rotav1.SchemeGroupVersion.String(), Kind: "GPUReservation"},
			ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("team-%02d", i/10), Name: fmt.Sprintf("res-%03d", i)},
			Spec:       rotav1.GPUReservationSpec{NodeName: benchNode(i), Count: ptr.To[int32](benchHeld)},
		}
		u, err := reservation.ToUnstructured(res)
		if err != nil {
			b.Fatal(err)
		}
		resObjs = append(resObjs, u)
		keys = append(keys, res.Namespace+"/"+res.Name)
	}
	client := fake.NewClientset()
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{rotav1.GPUReservationsResource: "GPUReservationList"}, resObjs...)
	inf := NewInformers(informers.NewSharedInformerFactory(client, 0), dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0))
	c, err := New(Options{Client: client, Dynamic: dyn, Clock: clocktesting.NewFakePassiveClock(time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)),
		Recorder: record.NewFakeRecorder(1 << 16), Informers: inf})
	if err != nil {
		b.Fatal(err)
	}
	bc := &benchCluster{ctx: ctx, c: c, inf: inf, client: client, dyn: dyn, keys: keys}
	add := func(inf cache.SharedIndexInformer, obj any) {
		if err := inf.GetIndexer().Add(obj); err != nil {
			b.Fatal(err)
		}
	}
	for _, o := range resObjs {
		add(inf.Reservations.Informer(), o)
	}
	claims := 0
	for n := range size.nodes {
		node := benchNode(n)
		add(inf.Nodes.Informer(), &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}})
		s := &resourceapi.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: node + "-gpus"},
			Spec: resourceapi.ResourceSliceSpec{Driver: gpuv1.DriverName, NodeName: ptr.To(node),
				Pool: resourceapi.ResourcePool{Name: node, ResourceSliceCount: 1}},
		}
		for g := range benchGPUsPerNode {
			name := fmt.Sprintf("gpu-%d", g)
			s.Spec.Devices = append(s.Spec.Devices, resourceapi.Device{Name: name,
				Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
					gpuv1.AttributeUUID:  {StringValue: ptr.To(fmt.Sprintf("GPU-%s-%d", node, g))},
					gpuv1.AttributeIndex: {IntValue: ptr.To(int64(g))},
					"model":              {StringValue: ptr.To("H100")},
				},
				Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{gpuv1.CapacityMemory: {Value: resource.MustParse("81559Mi")}},
			})
			if n < size.reservations && g < benchHeld {
				continue // free for the node's reservation
			}
			claims++
			add(inf.Claims.Informer(), &resourceapi.ResourceClaim{
				ObjectMeta: metav1.ObjectMeta{Namespace: "work", Name: fmt.Sprintf("claim-%s-%d", node, g)},
				Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
					Results: []resourceapi.DeviceRequestAllocationResult{{Request: "gpu", Driver: gpuv1.DriverName, Pool: node, Device: name}},
				}}},
			})
		}
		add(inf.Slices.Informer(), s)
		bc.slices = append(bc.slices, s)
	}
	// Steady state: sync every reservation and feed what it wrote back
	// into the caches until a round writes nothing.
	for round := 0; ; round++ {
		if round == 5 {
			b.Fatalf("still writing after %d rounds: %v", round, bc.writes())
		}
		bc.client.ClearActions()
		bc.dyn.ClearActions()
		for _, k := range keys {
			if err := c.sync(ctx, k); err != nil {
				b.Fatalf("sync %s: %v", k, err)
			}
		}
		if len(bc.writes()) == 0 {
			break
		}
		bc.refresh()
	}
	b.Logf("cluster: %d nodes × %d GPUs, %d reservations of %d GPUs, %d allocated claims", size.nodes, benchGPUsPerNode, size.reservations, benchHeld, claims)
	return bc
}

// writes are the API writes recorded since the last ClearActions.
func (bc *benchCluster) writes() []string {
	var out []string
	for _, a := range append(bc.client.Actions(), bc.dyn.Actions()...) {
		switch a.GetVerb() {
		case "get", "list", "watch":
		default:
			out = append(out, a.GetVerb()+" "+a.GetResource().Resource+"/"+a.GetSubresource())
		}
	}
	return out
}

// refresh puts the objects the fake API servers hold into the caches, as
// running informers would.
func (bc *benchCluster) refresh() {
	tracker := bc.client.Tracker()
	for _, kind := range []struct {
		resource, kind string
		inf            cache.SharedIndexInformer
	}{
		{"devicetaintrules", "DeviceTaintRule", bc.inf.Rules.Informer()},
		{"deviceclasses", "DeviceClass", bc.inf.Classes.Informer()},
		{"resourceclaims", "ResourceClaim", bc.inf.Claims.Informer()},
	} {
		gv, inf := resourceapi.SchemeGroupVersion, kind.inf
		list, err := tracker.List(gv.WithResource(kind.resource), gv.WithKind(kind.kind), "")
		if err != nil {
			panic(err)
		}
		objs, err := metaItems(list)
		if err != nil {
			panic(err)
		}
		for _, o := range objs {
			_ = inf.GetIndexer().Update(o)
		}
	}
	for _, k := range bc.keys {
		ns, name, _ := cache.SplitMetaNamespaceKey(k)
		u, err := bc.dyn.Resource(rotav1.GPUReservationsResource).Namespace(ns).Get(bc.ctx, name, metav1.GetOptions{})
		if err != nil {
			panic(err)
		}
		_ = bc.inf.Reservations.Informer().GetIndexer().Update(u)
	}
}

func metaItems(list runtime.Object) ([]runtime.Object, error) {
	switch l := list.(type) {
	case *resourceapi.DeviceTaintRuleList:
		out := make([]runtime.Object, len(l.Items))
		for i := range l.Items {
			out[i] = &l.Items[i]
		}
		return out, nil
	case *resourceapi.DeviceClassList:
		out := make([]runtime.Object, len(l.Items))
		for i := range l.Items {
			out[i] = &l.Items[i]
		}
		return out, nil
	case *resourceapi.ResourceClaimList:
		out := make([]runtime.Object, len(l.Items))
		for i := range l.Items {
			out[i] = &l.Items[i]
		}
		return out, nil
	}
	return nil, fmt.Errorf("unexpected list %T", list)
}

// drain syncs every queued reservation once and returns how many.
func (bc *benchCluster) drain(b *testing.B) int {
	n := 0
	for bc.c.queue.Len() > 0 {
		key, _ := bc.c.queue.Get()
		if err := bc.c.sync(bc.ctx, key); err != nil {
			b.Fatalf("sync %s: %v", key, err)
		}
		bc.c.queue.Forget(key)
		bc.c.queue.Done(key)
		n++
	}
	return n
}

// BenchmarkSync is one sync of one reservation in its steady state (it
// writes nothing) in the benchmark cluster.
func BenchmarkSync(b *testing.B) {
	benchSync(b, newBenchCluster(b, benchSize{benchNodes, benchReservations}))
}

func benchSync(b *testing.B, bc *benchCluster) {
	bc.client.ClearActions()
	bc.dyn.ClearActions()
	i := 0
	cpu := startCPU()
	for b.Loop() {
		if err := bc.c.sync(bc.ctx, bc.keys[i%len(bc.keys)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
	cpu.report(b)
	if w := bc.writes(); len(w) != 0 {
		b.Fatalf("steady-state syncs wrote %d times: %v", len(w), w[:min(len(w), 5)])
	}
}

// BenchmarkEventStorm is a burst of events and the syncs it causes: the
// DeviceTaintRules of 50 reservations and the ResourceSlices of 100 nodes
// (50 of them with a reservation) updated at once — as when a driver
// republishes after a health change and reservations move GPUs. The queue
// is drained once per burst; syncs/op is how many reservations it synced
// (50 are touched).
func BenchmarkEventStorm(b *testing.B) {
	benchEventStorm(b, newBenchCluster(b, benchSize{benchNodes, benchReservations}), benchReservations)
}

// benchEventStorm: the rules of the first 50 reservations, the slices of
// their nodes and of the 50 nodes after the reserved ones.
func benchEventStorm(b *testing.B, bc *benchCluster, reservations int) {
	rules, err := bc.c.rules.List(labels.Everything())
	if err != nil {
		b.Fatal(err)
	}
	touched := map[string]bool{}
	for i := range 50 {
		touched[benchNode(i)] = true
	}
	var ruleEvents []*resourceapi.DeviceTaintRule
	for _, r := range rules {
		if r.Spec.DeviceSelector != nil && r.Spec.DeviceSelector.Pool != nil && touched[*r.Spec.DeviceSelector.Pool] {
			ruleEvents = append(ruleEvents, r)
		}
	}
	sliceEvents := append(append([]*resourceapi.ResourceSlice{}, bc.slices[:50]...), bc.slices[reservations:reservations+50]...)
	syncs := 0
	cpu := startCPU()
	for b.Loop() {
		for _, r := range ruleEvents {
			bc.c.enqueueForRule(r)
		}
		for _, s := range sliceEvents {
			bc.c.enqueueForSlice(s)
		}
		syncs += bc.drain(b)
	}
	cpu.report(b)
	b.ReportMetric(float64(syncs)/float64(b.N), "syncs/op")
	b.ReportMetric(float64(len(ruleEvents)+len(sliceEvents)), "events/op")
}

// BenchmarkReservationCurve is how the controller's costs grow with the
// cluster: for each size (nodes × 8 GPUs, reservations of 2 GPUs, every
// other GPU allocated), one steady-state sync (sync), the 200-event burst
// of BenchmarkEventStorm (storm: 50 reservations concerned, whatever the
// size), and a sync of every reservation once (resync: what a restart or
// a full requeue costs).
func BenchmarkReservationCurve(b *testing.B) {
	for _, size := range []benchSize{{250, 100}, {500, 100}, {500, 250}, {1000, 100}, {1000, 250}, {1000, 500}} {
		b.Run(fmt.Sprintf("nodes=%d,reservations=%d", size.nodes, size.reservations), func(b *testing.B) {
			bc := newBenchCluster(b, size)
			b.Run("sync", func(b *testing.B) { benchSync(b, bc) })
			b.Run("storm", func(b *testing.B) { benchEventStorm(b, bc, size.reservations) })
			b.Run("resync", func(b *testing.B) {
				bc.client.ClearActions()
				bc.dyn.ClearActions()
				cpu := startCPU()
				for b.Loop() {
					for _, k := range bc.keys {
						if err := bc.c.sync(bc.ctx, k); err != nil {
							b.Fatal(err)
						}
					}
				}
				cpu.report(b)
				b.ReportMetric(float64(len(bc.keys)), "syncs/op")
				if w := bc.writes(); len(w) != 0 {
					b.Fatalf("steady-state syncs wrote %d times: %v", len(w), w[:min(len(w), 5)])
				}
			})
		})
	}
}

// cpuClock measures the process's CPU time (user and system), which the
// machine's other load does not inflate as it does wall time.
type cpuClock time.Duration

func cpuNow() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func startCPU() cpuClock { return cpuClock(cpuNow()) }

// report adds cpu-ms/op: CPU time per iteration since start.
func (c cpuClock) report(b *testing.B) {
	b.ReportMetric(float64(cpuNow()-time.Duration(c))/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
}
