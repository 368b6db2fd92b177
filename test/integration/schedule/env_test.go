package schedule

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/kubernetes/pkg/controller/deployment"
	"k8s.io/kubernetes/pkg/controller/replicaset"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/events"
	"github.com/rota-dev/rota/pkg/schedule/controller"
	"github.com/rota-dev/rota/test/integration/framework"
)

const (
	ns         = "serving"
	gateNS     = "rota-system"
	schedName  = "rota-scheduler"
	zoneName   = "Asia/Ho_Chi_Minh"
	grace      = 30 // seconds, pods' termination grace period
	clockStep  = 5 * time.Second
	settleTime = 40 * time.Millisecond
)

var zone = func() *time.Location {
	l, err := time.LoadLocation(zoneName)
	if err != nil {
		panic(err)
	}
	return l
}()

// at is a wall-clock time in October 2026 in the schedules' zone.
func at(day, hour, minute int) time.Time { return time.Date(2026, 10, day, hour, minute, 0, 0, zone) }

// env is one control plane with the workload controllers, the scheduler,
// the pod simulator and a fake clock.
type env struct {
	t     *testing.T
	ctx   context.Context
	cp    *framework.ControlPlane
	clock *clocktesting.FakeClock
	sim   *podSim
	// budget, when set before startController, is the controller's budget hook.
	budget controller.BudgetChecker
}

func newEnv(t *testing.T, start time.Time, nodes map[string]int) *env {
	t.Helper()
	return newEnvOn(t, framework.StartControlPlane(t), start, nodes)
}

// newEnvOn is newEnv on a control plane the test started itself (for
// example one that authorizes with RBAC).
func newEnvOn(t *testing.T, cp *framework.ControlPlane, start time.Time, nodes map[string]int) *env {
	t.Helper()
	gpus := make(map[string][]framework.GPU, len(nodes))
	for name, n := range nodes {
		gpus[name] = framework.GPUs(framework.H100, n)
	}
	return newEnvGPUs(t, cp, start, gpus)
}

// newEnvGPUs is newEnvOn with each node's GPUs given (mixed models).
func newEnvGPUs(t *testing.T, cp *framework.ControlPlane, start time.Time, nodes map[string][]framework.GPU) *env {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	e := &env{t: t, ctx: ctx, cp: cp, clock: clocktesting.NewFakeClock(start)}
	var objs []any
	objs = append(objs, framework.DeviceClass(), framework.DeploySchedulesNamespace(ns), framework.Namespace(gateNS))
	for name, gpus := range nodes {
		objs = append(objs, framework.Node(name), framework.GPUSlice(name, gpus...))
	}
	cp.Create(t, objs...)
	e.setGate("on")
	cp.StartClaimController(t)
	e.startWorkloadControllers()
	cp.StartScheduler(t)
	e.sim = startPodSim(t, cp.Client, e.clock, ns)
	return e
}

// startWorkloadControllers runs kube-controller-manager's Deployment and
// ReplicaSet controllers, which turn a scale change into pods.
func (e *env) startWorkloadControllers() {
	logger := ktesting.NewLogger(e.t, ktesting.NewConfig(ktesting.Verbosity(1)))
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	factory := informers.NewSharedInformerFactory(e.cp.Client, 0)
	dc, err := deployment.NewDeploymentController(ctx, factory.Apps().V1().Deployments(), factory.Apps().V1().ReplicaSets(), factory.Core().V1().Pods(), e.cp.Client)
	if err != nil {
		cancel()
		e.t.Fatalf("deployment controller: %v", err)
	}
	rsc := replicaset.NewReplicaSetController(ctx, factory.Apps().V1().ReplicaSets(), factory.Core().V1().Pods(), e.cp.Client, replicaset.BurstReplicas)
	factory.Start(ctx.Done())
	var wg sync.WaitGroup
	wg.Go(func() { dc.Run(ctx, 2) })
	wg.Go(func() { rsc.Run(ctx, 2) })
	e.t.Cleanup(func() {
		cancel()
		wg.Wait()
		factory.Shutdown()
	})
}

// runningController is one schedule controller instance.
type runningController struct {
	ctrl   *controller.Controller
	cancel context.CancelFunc
	done   chan struct{}
}

func (r *runningController) stop() {
	r.cancel()
	<-r.done
}

// startController runs a schedule controller on the fake clock.
func (e *env) startController(fp controller.Failpoints) *runningController {
	e.t.Helper()
	return e.startControllerAs(e.cp.Client, e.cp.Dynamic, fp)
}

// startControllerAs runs a schedule controller on the fake clock whose API
// calls and Events go through the given clients (for example clients that
// impersonate the controller's ServiceAccount).
func (e *env) startControllerAs(client kubernetes.Interface, dyn dynamic.Interface, fp controller.Failpoints) *runningController {
	e.t.Helper()
	logger := ktesting.NewLogger(e.t, ktesting.NewConfig(ktesting.Verbosity(2)))
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	recorder, stopEvents, err := events.NewRecorder(ctx, client, events.ControllerComponent)
	if err != nil {
		cancel()
		e.t.Fatal(err)
	}
	// The harness owns the informer factories, as the binary does: the
	// controller reads target workloads from them.
	factory := informers.NewSharedInformerFactory(client, 0)
	dynFactory := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	gateFactory := controller.NewGateInformerFactory(client, gateNS, controller.DefaultGateName)
	var lws informers.GenericInformer
	if _, err := client.Discovery().ServerResourcesForGroupVersion(v1alpha1.LeaderWorkerSetGroupVersion); err == nil {
		lws = dynFactory.ForResource(controller.LeaderWorkerSetsResource)
	}
	c, err := controller.New(controller.Options{
		Client: client, Dynamic: dyn, Clock: e.clock,
		Recorder:   recorder,
		DynFactory: dynFactory,
		Factory:    factory, LeaderWorkerSets: lws,
		GateNamespace: gateNS, GateFactory: gateFactory, Failpoints: fp,
		Budget: e.budget,
	})
	if err != nil {
		cancel()
		e.t.Fatalf("new controller: %v", err)
	}
	factory.Start(ctx.Done())
	dynFactory.Start(ctx.Done())
	gateFactory.Start(ctx.Done())
	r := &runningController{ctrl: c, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		c.Run(ctx, 2)
	}()
	e.t.Cleanup(func() {
		r.stop()
		factory.Shutdown()
		dynFactory.Shutdown()
		gateFactory.Shutdown()
		stopEvents()
	})
	return r
}

func (e *env) setGate(mode string) {
	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: gateNS, Name: controller.DefaultGateName}, Data: map[string]string{controller.GateKey: mode}}
	_, err := e.cp.Client.CoreV1().ConfigMaps(gateNS).Update(e.ctx, cm, metav1.UpdateOptions{})
	if err != nil {
		_, err = e.cp.Client.CoreV1().ConfigMaps(gateNS).Create(e.ctx, cm, metav1.CreateOptions{})
	}
	if err != nil {
		e.t.Fatalf("gate: %v", err)
	}
}

// gpuTemplate asks for n GPUs of Rota's class on one node.
func gpuTemplate(name string, n int64) *resourceapi.ResourceClaimTemplate {
	return &resourceapi.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{
				DeviceClassName: gpuv1.DeviceClassName, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: n,
			}}},
		}}},
	}
}

// gpuDeployment is a Deployment whose pods each take n GPUs through its own
// claim template, scheduled by Rota's scheduler.
func (e *env) gpuDeployment(name string, replicas int32, gpus int64) {
	e.t.Helper()
	e.gpuDeploymentWith(name, replicas, gpus, nil)
}

// gpuDeploymentWith is gpuDeployment with a change applied to the
// Deployment before it is created (labels, annotations).
func (e *env) gpuDeploymentWith(name string, replicas int32, gpus int64, mutate func(*appsv1.Deployment)) {
	e.t.Helper()
	tmpl := gpuTemplate(name+"-gpus", gpus)
	if _, err := e.cp.Client.ResourceV1().ResourceClaimTemplates(ns).Create(e.ctx, tmpl, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: v1.PodSpec{
					SchedulerName:                 schedName,
					TerminationGracePeriodSeconds: ptr.To[int64](grace),
					ResourceClaims:                []v1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To(tmpl.Name)}},
					Containers: []v1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10",
						Resources: v1.ResourceRequirements{Claims: []v1.ResourceClaim{{Name: "gpu"}}}}},
				},
			},
		},
	}
	if mutate != nil {
		mutate(d)
	}
	if _, err := e.cp.Client.AppsV1().Deployments(ns).Create(e.ctx, d, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// createSchedule creates a DeploySchedule from YAML.
func (e *env) createSchedule(doc string) {
	e.t.Helper()
	var u unstructured.Unstructured
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		e.t.Fatalf("schedule YAML: %v", err)
	}
	if _, err := e.cp.Dynamic.Resource(v1alpha1.DeploySchedulesResource).Namespace(ns).Create(e.ctx, &u, metav1.CreateOptions{}); err != nil {
		e.t.Fatalf("create schedule: %v", err)
	}
}

func (e *env) schedule(name string) *v1alpha1.DeploySchedule {
	e.t.Helper()
	u, err := e.cp.Dynamic.Resource(v1alpha1.DeploySchedulesResource).Namespace(ns).Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	var ds v1alpha1.DeploySchedule
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &ds); err != nil {
		e.t.Fatal(err)
	}
	return &ds
}

func (e *env) targetStatus(schedule, target string) v1alpha1.TargetStatus {
	for _, t := range e.schedule(schedule).Status.Targets {
		if t.Name == target {
			return t
		}
	}
	return v1alpha1.TargetStatus{}
}

func (e *env) deployment(name string) *appsv1.Deployment {
	d, err := e.cp.Client.AppsV1().Deployments(ns).Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return d
}

// advance steps the fake clock by clockStep until done reports true, giving
// the real components time to act after each step. It fails after max steps.
func (e *env) advance(what string, maxSteps int, done func() (bool, string)) {
	e.t.Helper()
	var state string
	for range maxSteps {
		var ok bool
		if ok, state = done(); ok {
			return
		}
		e.clock.Step(clockStep)
		time.Sleep(settleTime)
	}
	if ok, state := done(); ok {
		_ = state
		return
	}
	e.t.Fatalf("%s: not reached after %d clock steps of %s (now %s); last: %s", what, maxSteps, clockStep, e.clock.Now().In(zone).Format(time.RFC3339), state)
}

// tick steps the fake clock n times, letting the real components act.
func (e *env) tick(n int) {
	for range n {
		e.clock.Step(clockStep)
		time.Sleep(settleTime)
	}
}

// convergedSince waits until the controller has written the schedule's
// status at or after since and every target is Converged.
func (e *env) convergedSince(schedule string, since time.Time, maxSteps int) {
	e.t.Helper()
	e.advance("schedule "+schedule+" converged", maxSteps, func() (bool, string) {
		ds := e.schedule(schedule)
		state := ""
		ok := len(ds.Status.Targets) > 0 && ds.Status.LastPassTime != nil && !ds.Status.LastPassTime.Time.Before(since)
		for _, t := range ds.Status.Targets {
			state += fmt.Sprintf("[%s %s/%s %s] ", t.Name, t.Phase, t.Reason, t.Message)
			if t.Phase != v1alpha1.TargetPhaseConverged {
				ok = false
			}
		}
		return ok, state
	})
}
