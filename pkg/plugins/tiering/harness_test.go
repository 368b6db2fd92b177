package tiering

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	resourceslicetracker "k8s.io/dynamic-resource-allocation/resourceslice/tracker"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	kubeschedulerconfigv1 "k8s.io/kube-scheduler/config/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	configv1 "k8s.io/kubernetes/pkg/scheduler/apis/config/v1"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	plfeature "k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	schedulermetrics "k8s.io/kubernetes/pkg/scheduler/metrics"
	"k8s.io/kubernetes/pkg/scheduler/util/assumecache"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
)

const testDriver = "gpu.rota.dev"

// gpu is one simulated device: model and memory in GiB, optionally tainted.
type gpu struct {
	model   string
	memGiB  int64
	tainted bool
	// reservedBy, "<namespace>.<name>", puts a GPUReservation's taint on it.
	reservedBy string
}

func gpus(model string, memGiB int64, n int) []gpu {
	out := make([]gpu, n)
	for i := range out {
		out[i] = gpu{model: model, memGiB: memGiB}
	}
	return out
}

func testNode(name string) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}}}
}

func testSlice(node string, devs ...gpu) *resourceapi.ResourceSlice {
	s := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-gpus"},
		Spec: resourceapi.ResourceSliceSpec{
			Driver: testDriver, NodeName: ptr.To(node),
			Pool: resourceapi.ResourcePool{Name: node, ResourceSliceCount: 1},
		},
	}
	for i, g := range devs {
		d := resourceapi.Device{
			Name: fmt.Sprintf("gpu-%d", i),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"model": {StringValue: ptr.To(g.model)},
				"uuid":  {StringValue: ptr.To(fmt.Sprintf("GPU-%s-%d", node, i))},
			},
			Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
				"memory": {Value: *resource.NewQuantity(g.memGiB<<30, resource.BinarySI)},
			},
		}
		if g.tainted {
			d.Taints = []resourceapi.DeviceTaint{{Key: testDriver + "/unhealthy", Effect: resourceapi.DeviceTaintEffectNoSchedule}}
		}
		if g.reservedBy != "" {
			d.Taints = append(d.Taints, resourceapi.DeviceTaint{Key: gpuv1.ReservedTaintKey, Value: g.reservedBy, Effect: resourceapi.DeviceTaintEffectNoSchedule})
		}
		s.Spec.Devices = append(s.Spec.Devices, d)
	}
	return s
}

func testClass() *resourceapi.DeviceClass {
	return &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: testDriver},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{
			CEL: &resourceapi.CELDeviceSelector{Expression: fmt.Sprintf("device.driver == %q", testDriver)},
		}}},
	}
}

// modelSel is the CEL selector of a model tier.
func modelSel(model string) string {
	return fmt.Sprintf("device.attributes[%q].model == %q", testDriver, model)
}

// tieredClaim returns the claim "<pod>-gpu" asking for count devices of the
// first model in models that can be satisfied.
func tieredClaim(pod string, count int64, models ...string) *resourceapi.ResourceClaim {
	var subs []resourceapi.DeviceSubRequest
	for _, m := range models {
		subs = append(subs, resourceapi.DeviceSubRequest{
			Name: strings.ToLower(m), DeviceClassName: testDriver,
			Selectors:      []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: modelSel(m)}}},
			AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count,
		})
	}
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: pod + "-gpu", UID: types.UID(pod + "-gpu-uid")},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{{Name: "gpu", FirstAvailable: subs}},
		}},
	}
}

func testPod(name string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID(name + "-uid")},
		Spec:       v1.PodSpec{ResourceClaims: []v1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To(name + "-gpu")}}},
	}
}

// env runs DynamicResources and Tiering on a fake cluster through the same
// shared DRA manager the scheduler uses.
type env struct {
	ctx       context.Context
	dr        *dynamicresources.DynamicResources
	tiering   *Tiering
	nodeInfos []fwk.NodeInfo
	client    *fake.Clientset
}

func newEnv(tb testing.TB, nodes []*v1.Node, slices []*resourceapi.ResourceSlice, claims []*resourceapi.ResourceClaim) *env {
	tb.Helper()
	logger, _ := ktesting.NewTestContext(tb)
	if _, bench := tb.(*testing.B); bench {
		// ktesting logs at V(5); formatting those logs would dominate timings.
		logger = logr.Discard()
	}
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	tb.Cleanup(cancel)
	schedulermetrics.Register() // the framework's parallelizer reports to them

	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	tracker, err := resourceslicetracker.StartTracker(ctx, resourceslicetracker.Options{
		EnableDeviceTaintRules: true,
		SliceInformer:          factory.Resource().V1().ResourceSlices(),
		TaintInformer:          factory.Resource().V1().DeviceTaintRules(),
		KubeClient:             client,
	})
	if err != nil {
		tb.Fatalf("start slice tracker: %v", err)
	}
	claimsCache := assumecache.NewAssumeCache(logger, factory.Resource().V1().ResourceClaims().Informer(), "resource claim", "", nil)
	claimsSynced := claimsCache.AddEventHandler(cache.ResourceEventHandlerFuncs{}).HasSyncedChecker()
	draManager := dynamicresources.NewDRAManager(ctx, claimsCache, tracker, factory)

	fh, err := frameworkruntime.NewFramework(ctx, nil, nil,
		frameworkruntime.WithClientSet(client),
		frameworkruntime.WithInformerFactory(factory),
		frameworkruntime.WithEventRecorder(&events.FakeRecorder{}),
		frameworkruntime.WithSharedDRAManager(draManager),
		frameworkruntime.WithSnapshotSharedLister(internalcache.NewSnapshot(nil, nodes)),
	)
	if err != nil {
		tb.Fatalf("create framework: %v", err)
	}
	fts := plfeature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate)
	v1args := &kubeschedulerconfigv1.DynamicResourcesArgs{}
	configv1.SetDefaults_DynamicResourcesArgs(v1args)
	drArgs := &config.DynamicResourcesArgs{}
	if err := configv1.Convert_v1_DynamicResourcesArgs_To_config_DynamicResourcesArgs(v1args, drArgs, nil); err != nil {
		tb.Fatal(err)
	}
	dr, err := dynamicresources.New(ctx, drArgs, fh, fts)
	if err != nil {
		tb.Fatalf("create DynamicResources: %v", err)
	}
	tp, err := New(ctx, &TieringArgs{PolicyVersion: "test-v1"}, fh)
	if err != nil {
		tb.Fatalf("create Tiering: %v", err)
	}
	// The nodes are in the API as well as in the snapshot: Tiering's
	// recheck tells a removed node (NodeLost) from the node informer.
	for _, n := range nodes {
		if _, err := client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			tb.Fatal(err)
		}
	}
	for _, s := range slices {
		if _, err := client.ResourceV1().ResourceSlices().Create(ctx, s, metav1.CreateOptions{}); err != nil {
			tb.Fatal(err)
		}
	}
	for _, c := range claims {
		if _, err := client.ResourceV1().ResourceClaims(c.Namespace).Create(ctx, c, metav1.CreateOptions{}); err != nil {
			tb.Fatal(err)
		}
	}
	if _, err := client.ResourceV1().DeviceClasses().Create(ctx, testClass(), metav1.CreateOptions{}); err != nil {
		tb.Fatal(err)
	}
	factory.Start(ctx.Done())
	tb.Cleanup(func() {
		cancel() // informers stop only once the context is done
		factory.Shutdown()
	})
	factory.WaitForCacheSync(ctx.Done())
	cache.WaitFor(ctx, "event handlers", tracker.HasSyncedChecker(), claimsSynced)

	e := &env{ctx: ctx, dr: dr.(*dynamicresources.DynamicResources), tiering: tp.(*Tiering), client: client}
	for _, n := range nodes {
		ni := framework.NewNodeInfo()
		ni.SetNode(n)
		e.nodeInfos = append(e.nodeInfos, ni)
	}
	return e
}

// cycle runs one scheduling cycle's PreFilter, Filter, PreScore and Score
// for pod and returns the feasible nodes' Tiering scores and the state.
func (e *env) cycle(tb testing.TB, pod *v1.Pod) (map[string]int64, fwk.CycleState) {
	tb.Helper()
	cs := framework.NewCycleState()
	if _, st := e.dr.PreFilter(e.ctx, cs, pod, e.nodeInfos); !st.IsSuccess() {
		tb.Fatalf("DynamicResources PreFilter: %v", st)
	}
	if _, st := e.tiering.PreFilter(e.ctx, cs, pod, e.nodeInfos); !st.IsSuccess() {
		tb.Fatalf("Tiering PreFilter: %v", st)
	}
	var feasible []fwk.NodeInfo
	for _, ni := range e.nodeInfos {
		if st := e.dr.Filter(e.ctx, cs, pod, ni); st.IsSuccess() {
			feasible = append(feasible, ni)
		}
	}
	scores := map[string]int64{}
	if len(feasible) == 0 {
		return scores, cs
	}
	if st := e.tiering.PreScore(e.ctx, cs, pod, feasible); !st.IsSuccess() {
		tb.Fatalf("Tiering PreScore: %v", st)
	}
	for _, ni := range feasible {
		s, st := e.tiering.Score(e.ctx, cs, pod, ni)
		if !st.IsSuccess() {
			tb.Fatalf("Tiering Score %s: %v", ni.Node().Name, st)
		}
		scores[ni.Node().Name] = s
	}
	return scores, cs
}
