package scheduler

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/dynamic/dynamicinformer"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	kubescheduler "k8s.io/kubernetes/pkg/scheduler"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	configscheme "k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	configvalidation "k8s.io/kubernetes/pkg/scheduler/apis/config/validation"
	"k8s.io/kubernetes/pkg/scheduler/profile"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// testContext is a context whose logger writes to t. Verbosity 2: the
// scheduler's V(4+) logs of every node of every cycle would dominate the
// runtime under -race.
func testContext(t *testing.T) context.Context {
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(2)))
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	t.Cleanup(cancel)
	return ctx
}

// fakeCluster is what the scheduler talks to instead of kube-apiserver:
// a fake clientset for the built-in kinds, with binding made to work, and
// a fake dynamic client serving Rota's custom resources (and the owner
// workloads the scheduler watches through dynamic informers), all empty.
type fakeCluster struct {
	client  *fake.Clientset
	tracker *versionedTracker
	dynamic *dynamicfake.FakeDynamicClient
}

func newFakeCluster(t *testing.T) *fakeCluster {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(scheme), rotav1.AddToScheme(scheme)); err != nil {
		t.Fatal(err)
	}
	client := fake.NewClientset()
	c := &fakeCluster{client: client, tracker: &versionedTracker{ObjectTracker: client.Tracker()}, dynamic: dynamicfake.NewSimpleDynamicClient(scheme)}
	// Every call goes through the versioned tracker, binding first. The
	// fake runs one reaction at a time, so each write is atomic.
	client.PrependReactor("*", "*", clienttesting.ObjectReaction(c.tracker))
	client.PrependReactor("create", "pods", c.bindPod)
	return c
}

// versionedTracker is the fake's object tracker with two things of
// kube-apiserver that the scheduler depends on: every write gives the
// object a new resourceVersion (the scheduler's assume cache of claims
// ignores objects without one, and so would lose the allocations in
// flight), and an update of a stale version is a conflict. Create also
// gives an object without one a UID.
type versionedTracker struct {
	clienttesting.ObjectTracker
	version atomic.Int64
}

func (t *versionedTracker) Create(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...metav1.CreateOptions) error {
	m, err := meta.Accessor(obj)
	if err != nil {
		return err
	}
	if m.GetUID() == "" {
		m.SetUID(uuid.NewUUID())
	}
	t.stamp(m)
	return t.ObjectTracker.Create(gvr, obj, ns, opts...)
}

func (t *versionedTracker) Update(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...metav1.UpdateOptions) error {
	m, err := meta.Accessor(obj)
	if err != nil {
		return err
	}
	if v := m.GetResourceVersion(); v != "" {
		stored, err := t.Get(gvr, ns, m.GetName())
		if err != nil {
			return err
		}
		if sm, err := meta.Accessor(stored); err == nil && sm.GetResourceVersion() != v {
			return apierrors.NewConflict(gvr.GroupResource(), m.GetName(),
				fmt.Errorf("resourceVersion %s is stale, the object is at %s", v, sm.GetResourceVersion()))
		}
	}
	t.stamp(m)
	return t.ObjectTracker.Update(gvr, obj, ns, opts...)
}

func (t *versionedTracker) Patch(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...metav1.PatchOptions) error {
	m, err := meta.Accessor(obj)
	if err != nil {
		return err
	}
	t.stamp(m)
	return t.ObjectTracker.Patch(gvr, obj, ns, opts...)
}

func (t *versionedTracker) stamp(m metav1.Object) {
	m.SetResourceVersion(strconv.FormatInt(t.version.Add(1), 10))
}

// bindPod persists a pods/binding the way kube-apiserver does: the pod
// gets the target node and the binding's annotations (Tiering's
// rota.dev/tier rides on its binding) in one write, and a binding for a
// pod already bound, or for another pod of that name, is a conflict. The
// fake's own tracker would return the binding and change nothing.
func (c *fakeCluster) bindPod(action clienttesting.Action) (bool, runtime.Object, error) {
	if action.GetSubresource() != "binding" {
		return false, nil, nil
	}
	binding, ok := action.(clienttesting.CreateAction).GetObject().(*v1.Binding)
	if !ok {
		return true, nil, fmt.Errorf("pods/binding: unexpected object %T", action.(clienttesting.CreateAction).GetObject())
	}
	podsResource := v1.SchemeGroupVersion.WithResource("pods")
	obj, err := c.tracker.Get(podsResource, action.GetNamespace(), binding.Name)
	if err != nil {
		return true, nil, err
	}
	pod := obj.(*v1.Pod)
	if pod.Spec.NodeName != "" || (binding.UID != "" && binding.UID != pod.UID) {
		return true, nil, apierrors.NewConflict(podsResource.GroupResource(), pod.Name,
			fmt.Errorf("pod has node %q and UID %s, binding targets node %q for UID %s", pod.Spec.NodeName, pod.UID, binding.Target.Name, binding.UID))
	}
	pod.Spec.NodeName = binding.Target.Name
	for k, v := range binding.Annotations {
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		pod.Annotations[k] = v
	}
	pod.Status.Conditions = append(pod.Status.Conditions, v1.PodCondition{Type: v1.PodScheduled, Status: v1.ConditionTrue})
	return true, binding, c.tracker.Update(podsResource, pod, pod.Namespace)
}

// create creates each object with the fake's typed client.
func (c *fakeCluster) create(ctx context.Context, objs ...runtime.Object) error {
	for _, obj := range objs {
		var err error
		switch o := obj.(type) {
		case *v1.Node:
			_, err = c.client.CoreV1().Nodes().Create(ctx, o, metav1.CreateOptions{})
		case *v1.Pod:
			_, err = c.client.CoreV1().Pods(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *resourceapi.DeviceClass:
			_, err = c.client.ResourceV1().DeviceClasses().Create(ctx, o, metav1.CreateOptions{})
		case *resourceapi.ResourceSlice:
			_, err = c.client.ResourceV1().ResourceSlices().Create(ctx, o, metav1.CreateOptions{})
		case *resourceapi.ResourceClaim:
			_, err = c.client.ResourceV1().ResourceClaims(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		default:
			err = fmt.Errorf("unsupported object %T", obj)
		}
		if err != nil {
			return fmt.Errorf("create %T: %w", obj, err)
		}
	}
	return nil
}

// shippedConfig decodes manifests/scheduler/config.yaml as kube-scheduler
// does (the scheduler config scheme's decoder, defaults applied, Rota's
// plugin args left raw for the plugins to decode) and validates it.
// Of what it sets, clientConnection (rate limits of the API client) and
// leaderElection do not apply here: the fake has no rate limits, and the
// test runs the scheduler as kube-scheduler does once elected.
func shippedConfig(t *testing.T) *schedconfig.KubeSchedulerConfiguration {
	t.Helper()
	path := filepath.Join("..", "..", "manifests", "scheduler", "config.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	obj, gvk, err := configscheme.Codecs.UniversalDecoder().Decode(data, nil, nil)
	if err != nil {
		t.Fatalf("decode %s: %v", path, err)
	}
	cfg, ok := obj.(*schedconfig.KubeSchedulerConfiguration)
	if !ok {
		t.Fatalf("%s: got %s, want a KubeSchedulerConfiguration", path, gvk)
	}
	cfg.APIVersion = gvk.GroupVersion().String()
	if err := configvalidation.ValidateKubeSchedulerConfiguration(cfg); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	for _, p := range cfg.Profiles {
		if p.SchedulerName == ProfileName {
			return cfg
		}
	}
	t.Fatalf("%s has no %s profile", path, ProfileName)
	return nil
}

// startScheduler builds kube-scheduler's scheduler from cfg with Rota's
// registry, the way kube-scheduler's Setup does, against the fake cluster,
// starts it once its informers have synced, and stops it (waiting for Run
// to return) when the test ends.
//
// The one difference from the shipped binary: Reservation gets the fake
// dynamic client, where it would make one from the scheduler's kubeconfig
// (there is none without an API server). WaitReason, without a kubeconfig,
// leaves DeploySchedules out of its unblock advice, as documented.
func startScheduler(ctx context.Context, t *testing.T, c *fakeCluster, cfg *schedconfig.KubeSchedulerConfiguration) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	informers := kubescheduler.NewInformerFactory(c.client, 0, nil)
	dynInformers := dynamicinformer.NewFilteredDynamicSharedInformerFactory(c.dynamic, 0, v1.NamespaceAll, nil)
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: c.client.EventsV1()})
	sched, err := kubescheduler.New(ctx, c.client, informers, dynInformers, profile.NewRecorderFactory(broadcaster),
		kubescheduler.WithComponentConfigVersion(cfg.APIVersion),
		kubescheduler.WithProfiles(cfg.Profiles...),
		kubescheduler.WithPercentageOfNodesToScore(cfg.PercentageOfNodesToScore),
		kubescheduler.WithFrameworkOutOfTreeRegistry(registry(nil, c.dynamic)),
		kubescheduler.WithPodMaxBackoffSeconds(cfg.PodMaxBackoffSeconds),
		kubescheduler.WithPodInitialBackoffSeconds(cfg.PodInitialBackoffSeconds),
		kubescheduler.WithExtenders(cfg.Extenders...),
		kubescheduler.WithParallelism(cfg.Parallelism),
	)
	if err != nil {
		cancel()
		t.Fatalf("create scheduler: %v", err)
	}
	broadcaster.StartRecordingToSink(ctx.Done())
	informers.Start(ctx.Done())
	dynInformers.Start(ctx.Done())
	informers.WaitForCacheSync(ctx.Done())
	dynInformers.WaitForCacheSync(ctx.Done())
	if err := sched.WaitForHandlersSync(ctx); err != nil {
		cancel()
		t.Fatalf("scheduler event handlers: %v", err)
	}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		sched.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-stopped
		informers.Shutdown()
		dynInformers.Shutdown()
		broadcaster.Shutdown()
	})
}

// gpuNode returns a ready node with room for many pods, and the
// ResourceSlice publishing its n GPUs of model as Rota's driver does: one
// pool named after the node, devices gpu-0, gpu-1, ...
func gpuNode(name, model string, n int) (*v1.Node, *resourceapi.ResourceSlice) {
	capacity := v1.ResourceList{v1.ResourcePods: resource.MustParse("110"), v1.ResourceCPU: resource.MustParse("64"), v1.ResourceMemory: resource.MustParse("512Gi")}
	node := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}},
		Status: v1.NodeStatus{Capacity: capacity, Allocatable: capacity,
			Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}},
	}
	slice := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-" + gpuv1.DriverName},
		Spec: resourceapi.ResourceSliceSpec{
			Driver: gpuv1.DriverName, NodeName: ptr.To(name),
			Pool: resourceapi.ResourcePool{Name: name, ResourceSliceCount: 1},
		},
	}
	for i := range n {
		slice.Spec.Devices = append(slice.Spec.Devices, resourceapi.Device{
			Name: fmt.Sprintf("gpu-%d", i),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"model": {StringValue: ptr.To(model)},
				"uuid":  {StringValue: ptr.To(fmt.Sprintf("GPU-%s-%d", name, i))},
				"index": {IntValue: ptr.To(int64(i))},
			},
			Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
				"memory": {Value: *resource.NewQuantity(80<<30, resource.BinarySI)},
			},
		})
	}
	return node, slice
}

// gpuClass is the DeviceClass selecting every device of Rota's driver.
func gpuClass() *resourceapi.DeviceClass {
	return &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: gpuv1.DeviceClassName},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{
			CEL: &resourceapi.CELDeviceSelector{Expression: fmt.Sprintf("device.driver == %q", gpuv1.DriverName)},
		}}},
	}
}

// tieredGPUPod returns a pod for the rota-scheduler profile and its claim
// "<name>-gpu", whose one request "gpu" asks for one GPU of the first of
// models that can be had (firstAvailable).
func tieredGPUPod(namespace, name string, models ...string) (*v1.Pod, *resourceapi.ResourceClaim) {
	claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name + "-gpu"}}
	request := resourceapi.DeviceRequest{Name: "gpu"}
	for _, m := range models {
		request.FirstAvailable = append(request.FirstAvailable, resourceapi.DeviceSubRequest{
			Name: strings.ToLower(m), DeviceClassName: gpuv1.DeviceClassName,
			Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
				Expression: fmt.Sprintf("device.attributes[%q].model == %q", gpuv1.DriverName, m),
			}}},
			AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1,
		})
	}
	claim.Spec.Devices.Requests = []resourceapi.DeviceRequest{request}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: v1.PodSpec{
			SchedulerName:  ProfileName,
			ResourceClaims: []v1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To(claim.Name)}},
			Containers: []v1.Container{{
				Name: "main", Image: "registry.k8s.io/pause:3.10",
				Resources: v1.ResourceRequirements{Claims: []v1.ResourceClaim{{Name: "gpu"}}},
			}},
		},
	}
	return pod, claim
}
