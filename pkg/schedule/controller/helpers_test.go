package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

const (
	ns       = "serving"
	gateNS   = "rota-system"
	driver   = "gpu.rota.dev"
	zoneName = "Asia/Ho_Chi_Minh"
)

var zone = func() *time.Location {
	l, err := time.LoadLocation(zoneName)
	if err != nil {
		panic(err)
	}
	return l
}()

// at returns a wall-clock instant in the schedule's zone.
func at(day, hour, minute int) time.Time {
	return time.Date(2026, 10, day, hour, minute, 0, 0, zone)
}

// env is a controller against fake clients with a fake clock.
type env struct {
	t        testing.TB
	ctx      context.Context
	client   *fake.Clientset
	dyn      *dynamicfake.FakeDynamicClient
	clock    *clocktesting.FakeClock
	recorder *record.FakeRecorder
	ctrl     *Controller
	fp       *failpoints
	ready    bool
	events   []string
	// calls are the API calls the controller made (not the test), as
	// "verb group/resource[/subresource]".
	calls map[string]bool
	// gates is the gate informer's factory, started by newEnv, as the
	// binary runs it: passes read the gate from its cache.
	gates informers.SharedInformerFactory
}

// reconcile runs one pass and records the API calls it made.
func (e *env) reconcile(name string) (time.Duration, error) {
	nc, nd := len(e.client.Actions()), len(e.dyn.Actions())
	requeue, err := e.ctrl.Reconcile(e.ctx, ns, name)
	if e.calls == nil {
		e.calls = map[string]bool{}
	}
	for _, a := range append(e.client.Actions()[nc:], e.dyn.Actions()[nd:]...) {
		r := a.GetResource().Group + "/" + a.GetResource().Resource
		if a.GetSubresource() != "" {
			r += "/" + a.GetSubresource()
		}
		e.calls[a.GetVerb()+" "+r] = true
	}
	return requeue, err
}

func newEnv(t testing.TB, now time.Time, objs ...runtime.Object) *env {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	// An empty scheme keeps the fake dynamic client's objects unstructured,
	// as they are on a real apiserver.
	scheme := runtime.NewScheme()
	e := &env{t: t, ctx: ctx, clock: clocktesting.NewFakeClock(now), recorder: record.NewFakeRecorder(1000), fp: &failpoints{}}
	e.client = fake.NewClientset(append(objs, gateConfigMap("on"))...)
	e.dyn = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme, map[schema.GroupVersionResource]string{
		v1alpha1.DeploySchedulesResource: "DeployScheduleList",
		v1alpha1.GPUReservationsResource: "GPUReservationList",
	})
	e.gates = NewGateInformerFactory(e.client, gateNS, DefaultGateName)
	e.ctrl = e.newController()
	gctx, cancel := context.WithCancel(ctx)
	e.gates.Start(gctx.Done())
	t.Cleanup(func() {
		cancel()
		e.gates.Shutdown()
	})
	if !cache.WaitForCacheSync(gctx.Done(), e.ctrl.gate.synced) {
		t.Fatal("gate informer not synced")
	}
	return e
}

func (e *env) newController() *Controller {
	c, err := New(Options{Client: e.client, Dynamic: e.dyn, Clock: e.clock, Recorder: e.recorder,
		GateNamespace: gateNS, GateFactory: e.gates, Failpoints: e.fp})
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// waitGate waits until the gate informer's cache holds what the API holds
// (the ConfigMap's mode, or no ConfigMap), so that the next pass reads the
// gate the test set.
func (e *env) waitGate() {
	e.t.Helper()
	lister := e.gates.Core().V1().ConfigMaps().Lister().ConfigMaps(gateNS)
	err := wait.PollUntilContextTimeout(e.ctx, time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		want, werr := e.client.CoreV1().ConfigMaps(gateNS).Get(e.ctx, DefaultGateName, metav1.GetOptions{})
		got, gerr := lister.Get(DefaultGateName)
		if werr != nil || gerr != nil {
			return apierrors.IsNotFound(werr) && apierrors.IsNotFound(gerr), nil
		}
		return want.Data[GateKey] == got.Data[GateKey], nil
	})
	if err != nil {
		e.t.Fatalf("the gate informer never caught up: %v", err)
	}
}

func gateConfigMap(mode string) *v1.ConfigMap {
	return &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: gateNS, Name: DefaultGateName}, Data: map[string]string{GateKey: mode}}
}

func (e *env) setGate(mode string) {
	defer e.waitGate()
	if mode == "" {
		if err := e.client.CoreV1().ConfigMaps(gateNS).Delete(e.ctx, DefaultGateName, metav1.DeleteOptions{}); err != nil {
			e.t.Fatal(err)
		}
		return
	}
	if _, err := e.client.CoreV1().ConfigMaps(gateNS).Update(e.ctx, gateConfigMap(mode), metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) addSchedule(ds *v1alpha1.DeploySchedule) {
	e.t.Helper()
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ds)
	if err != nil {
		e.t.Fatal(err)
	}
	u := unstructuredOf(obj)
	if _, err := e.dyn.Resource(v1alpha1.DeploySchedulesResource).Namespace(ds.Namespace).Create(e.ctx, u, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) schedule(name string) *v1alpha1.DeploySchedule {
	e.t.Helper()
	ds, err := e.ctrl.schedules.get(e.ctx, ns, name)
	if err != nil {
		e.t.Fatal(err)
	}
	return ds
}

func (e *env) targetStatus(schedule, target string) v1alpha1.TargetStatus {
	e.t.Helper()
	for _, t := range e.schedule(schedule).Status.Targets {
		if t.Name == target {
			return t
		}
	}
	e.t.Fatalf("no status for target %s", target)
	return v1alpha1.TargetStatus{}
}

// pass runs one reconcile pass and then lets the fake "deployment controller"
// bring every Deployment's status to its spec (pods ready at once).
func (e *env) pass(name string) error {
	e.t.Helper()
	_, err := e.reconcile(name)
	e.settle(true)
	return err
}

func (e *env) mustPass(name string) {
	e.t.Helper()
	if err := e.pass(name); err != nil {
		e.t.Fatalf("pass: %v", err)
	}
}

// settle sets each Deployment's status to its spec; ready=false leaves the
// new replicas unready.
func (e *env) settle(ready bool) {
	list, err := e.client.AppsV1().Deployments(ns).List(e.ctx, metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	for i := range list.Items {
		d := &list.Items[i]
		want := ptr.Deref(d.Spec.Replicas, 1)
		d.Status.ObservedGeneration = d.Generation
		d.Status.Replicas, d.Status.UpdatedReplicas = want, want
		if ready {
			d.Status.ReadyReplicas = want
		} else if d.Status.ReadyReplicas > want {
			d.Status.ReadyReplicas = want
		}
		if _, err := e.client.AppsV1().Deployments(ns).UpdateStatus(e.ctx, d, metav1.UpdateOptions{}); err != nil {
			e.t.Fatal(err)
		}
		if want == 0 {
			// The pods are gone and the ResourceClaim controller frees their claims.
			_ = e.client.ResourceV1().ResourceClaims(ns).Delete(e.ctx, d.Name+"-claim", metav1.DeleteOptions{})
		}
	}
}

func (e *env) replicas(name string) int32 {
	d, err := e.client.AppsV1().Deployments(ns).Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return ptr.Deref(d.Spec.Replicas, 1)
}

// workloadWrites counts updates of Deployments (not their status).
func (e *env) workloadWrites() int {
	n := 0
	for _, a := range e.client.Actions() {
		if a.GetVerb() == "update" && a.GetResource().Resource == "deployments" && a.GetSubresource() == "" {
			n++
		}
	}
	return n
}

// run passes until the schedule is Ready or n passes ran, stepping the clock.
func (e *env) converge(name string, n int) {
	e.t.Helper()
	for range n {
		e.mustPass(name)
		ds := e.schedule(name)
		if ds.Status.ConvergedCount == ds.Status.TargetCount && ds.Status.TargetCount > 0 {
			return
		}
		e.clock.Step(5 * time.Second)
	}
}

type failpoints struct {
	mu            sync.Mutex
	failBefore    bool
	failAfter     bool
	writes, calls int
}

var errCrash = errors.New("simulated crash")

func (f *failpoints) BeforeMutation(context.Context, string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failBefore {
		f.failBefore = false
		return errCrash
	}
	return nil
}

func (f *failpoints) AfterMutation(_ context.Context, _ string, wrote bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if wrote {
		f.writes++
	}
	if f.failAfter {
		f.failAfter = false
		return errCrash
	}
	return nil
}

// --- object builders ---

func deployment(name string, replicas int32, template string, labels map[string]string) *appsv1.Deployment {
	if labels == nil {
		labels = map[string]string{"app": name}
	}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Generation: 1},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "main", Image: "pause"}}},
			},
		},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: replicas, ReadyReplicas: replicas, UpdatedReplicas: replicas},
	}
	if template != "" {
		d.Spec.Template.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To(template)}}
	}
	return d
}

func claimTemplate(name string, count int64) *resourceapi.ResourceClaimTemplate {
	return &resourceapi.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{
				DeviceClassName: driver, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count,
			}}},
		}}},
	}
}

func deviceClass() *resourceapi.DeviceClass {
	return &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: driver}, Spec: resourceapi.DeviceClassSpec{
		Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: fmt.Sprintf("device.driver == %q", driver)}}},
	}}
}

func node(name string) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}}}
}

func gpuSlice(nodeName string, n int) *resourceapi.ResourceSlice {
	devs := make([]resourceapi.Device, n)
	for i := range devs {
		devs[i] = resourceapi.Device{Name: fmt.Sprintf("gpu-%d", i), Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			"uuid": {StringValue: ptr.To(fmt.Sprintf("GPU-%s-%d", nodeName, i))},
		}}
	}
	return &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: nodeName + "-gpus"}, Spec: resourceapi.ResourceSliceSpec{
		Driver: driver, NodeName: ptr.To(nodeName), Pool: resourceapi.ResourcePool{Name: nodeName, ResourceSliceCount: 1}, Devices: devs,
	}}
}

// allocatedClaim is a claim holding the first n devices of a node from offset.
func allocatedClaim(name, nodeName string, offset, n int) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(name)},
		Spec: claimTemplate("x", int64(n)).Spec.Spec}
	var results []resourceapi.DeviceRequestAllocationResult
	for i := offset; i < offset+n; i++ {
		results = append(results, resourceapi.DeviceRequestAllocationResult{Request: "gpu", Driver: driver, Pool: nodeName, Device: fmt.Sprintf("gpu-%d", i)})
	}
	c.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: results}}
	return c
}

// weekSchedule is docs/schedule.md's example schedule.
func weekSchedule() *v1alpha1.DeploySchedule {
	return &v1alpha1.DeploySchedule{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "DeploySchedule"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pool", UID: "uid-pool", Generation: 1, CreationTimestamp: metav1.NewTime(at(1, 0, 0))},
		Spec: v1alpha1.DeployScheduleSpec{
			TimeZone: zoneName, Mode: v1alpha1.ScheduleModeEnforce, TransitionOrder: v1alpha1.TransitionOrderReleaseFirst,
			Targets: []v1alpha1.ScheduleTarget{
				{Name: "llama70b", WorkloadRef: v1alpha1.WorkloadReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "md-llama70b"},
					DefaultState: v1alpha1.StateStopped, DefaultAllowDowntime: true},
				{Name: "qwen32b", WorkloadRef: v1alpha1.WorkloadReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "md-qwen32b"},
					DefaultState: v1alpha1.StateRunning},
			},
			Windows: []v1alpha1.ScheduleWindow{{
				Name: "business-hours", Priority: 10,
				Recurring: &v1alpha1.RecurringWindow{Cron: "0 8 * * 1-5", Duration: "10h"},
				States: []v1alpha1.TargetState{
					{Target: "llama70b", DesiredState: v1alpha1.StateRunning},
					{Target: "qwen32b", DesiredState: v1alpha1.StateStopped},
				},
			}},
		},
	}
}

// poolObjects: one node with 10 GPUs, llama (8 GPUs) stopped, qwen (6 GPUs)
// running with its claim allocated, and the bge embedder (2 GPUs) untouched.
func poolObjects() []runtime.Object {
	return []runtime.Object{
		deviceClass(), node("gpu-node"), gpuSlice("gpu-node", 10),
		claimTemplate("gpu8", 8), claimTemplate("gpu6", 6), claimTemplate("gpu2", 2),
		deployment("md-llama70b", 0, "gpu8", nil), deployment("md-qwen32b", 1, "gpu6", nil), deployment("md-bge-embed", 1, "gpu2", nil),
		allocatedClaim("md-bge-embed-claim", "gpu-node", 0, 2), allocatedClaim("md-qwen32b-claim", "gpu-node", 2, 6),
	}
}

func unstructuredOf(obj map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: obj}
}
