package security

import (
	"context"
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/waits"
	"github.com/rota-dev/rota/test/integration/framework"
)

// TestExtendedResourcesRoutedAndCounted: issue #38 point 3. A DeviceClass
// with an extendedResourceName lets a pod ask for Rota's GPUs without a
// claim (limits: {example.com/gpu: 1}). Such a pod is routed to
// rota-scheduler like a claim pod, or refused on another scheduler; a
// class may serve only the extended resources the cluster admin declared
// in rota-admission; in a namespace with the rota-gpus quota a pod may ask
// only for classes that quota counts, and the claim the scheduler writes
// for it is charged to the class's quota line.
func TestExtendedResourcesRoutedAndCounted(t *testing.T) {
	e := setup(t)
	l := newLedger(t)
	ctx := context.Background()
	const (
		declared = "example.com/gpu"
		class    = "gpu-as-extended.example.com"
	)
	asExtended := func(name, scheduler string, resources ...v1.ResourceName) *v1.Pod {
		p := gpuPod(teamA, name, scheduler)
		p.Spec.ResourceClaims = nil
		p.Spec.Containers[0].Resources = v1.ResourceRequirements{Limits: v1.ResourceList{}}
		for _, r := range resources {
			p.Spec.Containers[0].Resources.Limits[r] = resource.MustParse("1")
		}
		return p
	}
	extendedClass := func(name, extended string) *resourceapi.DeviceClass {
		return &resourceapi.DeviceClass{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: resourceapi.DeviceClassSpec{
				Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
					Expression: fmt.Sprintf("device.driver == %q", gpuv1.DriverName),
				}}},
				ExtendedResourceName: ptr.To(extended),
			},
		}
	}
	createAsAlice := func(p *v1.Pod) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := e.alice.CoreV1().Pods(p.Namespace).Create(ctx, p, dryRun)
			return err
		}
	}

	// The cluster admin declares the name, then adds the class.
	declareExtendedResource(t, e.cp.Client, declared)
	framework.WaitFor(t, "the declared extended resource to be routed", func(ctx context.Context) (bool, string, error) {
		p, err := e.alice.CoreV1().Pods(teamA).Create(ctx, asExtended("probe", v1.DefaultSchedulerName, declared), dryRun)
		if err != nil {
			return false, err.Error(), nil
		}
		return p.Spec.SchedulerName == rotaScheduler, "scheduler " + p.Spec.SchedulerName, nil
	})
	if _, err := e.cp.Client.ResourceV1().DeviceClasses().Create(ctx, extendedClass(class, declared), metav1.CreateOptions{}); err != nil {
		t.Fatalf("a class serving a declared extended resource: %v", err)
	}

	t.Run("a class may serve only a declared extended resource", func(t *testing.T) {
		_, err := e.cp.Client.ResourceV1().DeviceClasses().Create(ctx, extendedClass("free.example.com", "example.com/free-gpu"), dryRun)
		if err == nil || !contains(err, "rota-extended-resources", "spec.extendedResourceName: example.com/free-gpu is not in extendedResourceNames", "rota-system/rota-admission") {
			t.Errorf("an undeclared extendedResourceName: %v, want refused by rota-extended-resources", err)
		}
		c, err := e.cp.Client.ResourceV1().DeviceClasses().Get(ctx, class, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		c.Spec.ExtendedResourceName = ptr.To("example.com/free-gpu")
		if _, err := e.cp.Client.ResourceV1().DeviceClasses().Update(ctx, c, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}}); err == nil {
			t.Error("a class was renamed to an undeclared extended resource")
		}
	})
	t.Run("an extended resource no class serves is left alone", func(t *testing.T) {
		p, err := e.alice.CoreV1().Pods(teamA).Create(ctx, asExtended("nic", v1.DefaultSchedulerName, "example.com/nic"), dryRun)
		if err != nil || p.Spec.SchedulerName != v1.DefaultSchedulerName {
			t.Fatalf("pod: %v, want it created on %s", err, v1.DefaultSchedulerName)
		}
		if _, err := e.alice.CoreV1().Pods(teamA).Create(ctx, asExtended("nic-own", "my-scheduler", "example.com/nic"), dryRun); err != nil {
			t.Errorf("a pod asking for an undeclared extended resource on its own scheduler: %v", err)
		}
	})

	l.hostile(t, "declared extended-resource pod on another scheduler", createAsAlice(asExtended("ext", "my-scheduler", declared)),
		"rota-gpu-pods", "spec.schedulerName", "set spec.schedulerName: rota-scheduler")
	l.hostile(t, "declared extended resource hidden beside an undeclared one", createAsAlice(asExtended("mixed", "my-scheduler", "example.com/nic", declared)),
		"spec.schedulerName")

	// Counting: team-a's quota counts gpu.rota.dev and, from the admin,
	// the new class.
	q := applyTenantQuota(t, e.cp, teamA)
	line := v1.ResourceName(class + ".deviceclass.resource.k8s.io/devices")
	q.Spec.Hard[line] = resource.MustParse("1")
	q, err := e.cp.Client.CoreV1().ResourceQuotas(teamA).Update(ctx, q, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// No quota controller runs here: the status it would write.
	q.Status.Hard, q.Status.Used[line] = q.Spec.Hard, resource.MustParse("0")
	if _, err := e.cp.Client.CoreV1().ResourceQuotas(teamA).UpdateStatus(ctx, q, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.WaitFor(t, "the class policy to read team-a's quota", func(ctx context.Context) (bool, string, error) {
		err := createAsAlice(asExtended("probe", rotaScheduler, "deviceclass.resource.kubernetes.io/h100.example.com"))(ctx)
		return err != nil, fmt.Sprint(err), nil
	})
	l.hostile(t, "extended-resource pod of a class the quota does not count", createAsAlice(asExtended("uncounted", rotaScheduler, "deviceclass.resource.kubernetes.io/h100.example.com")),
		"rota-gpu-classes-counted", "does not count DeviceClass h100.example.com", "gpu.rota.dev")

	t.Run("the scheduler's claim for an extended resource is charged to the class's quota line", func(t *testing.T) {
		e.cp.Create(t, framework.Node("gpu-node"), framework.GPUSlice("gpu-node", framework.GPUs(framework.GPU{Model: "H100", Architecture: "Hopper", MemoryGiB: 80}, 2)...))
		e.cp.StartScheduler(t)
		if _, err := e.alice.CoreV1().Pods(teamA).Create(ctx, asExtended("trainer", v1.DefaultSchedulerName, declared), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		p := e.cp.WaitForPodBound(t, teamA, "trainer")
		if p.Spec.SchedulerName != rotaScheduler {
			t.Errorf("bound pod's scheduler %q, want %s", p.Spec.SchedulerName, rotaScheduler)
		}
		framework.WaitFor(t, "the quota to charge the claim", func(ctx context.Context) (bool, string, error) {
			q, err := e.cp.Client.CoreV1().ResourceQuotas(teamA).Get(ctx, "rota-gpus", metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			used := q.Status.Used[line]
			return used.Value() == 1, fmt.Sprintf("used %v", q.Status.Used), nil
		})
		// The line is full: a second pod's claim is refused by the quota,
		// and the pod is not placed.
		if _, err := e.alice.CoreV1().Pods(teamA).Create(ctx, asExtended("second", "", declared), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		framework.WaitFor(t, "the second pod to wait on the quota", func(ctx context.Context) (bool, string, error) {
			p, err := e.cp.Client.CoreV1().Pods(teamA).Get(ctx, "second", metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			if p.Spec.NodeName != "" {
				return false, "", fmt.Errorf("placed on %s past its quota", p.Spec.NodeName)
			}
			for _, c := range p.Status.Conditions {
				if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse && strings.Contains(c.Message, "exceeded quota") {
					return true, "", nil
				}
			}
			return false, fmt.Sprint(p.Status.Conditions), nil
		})
		// The claim was refused in the binding cycle, by no Rota plugin:
		// the pod waits BindingFailed, the error in PodScheduled.
		e.cp.WaitForWaiting(t, teamA, "second", string(waits.BindingFailed), "the placement was undone before binding")
	})
}

// declareExtendedResource adds name to extendedResourceNames of the
// cluster admin's parameter object.
func declareExtendedResource(t *testing.T, c kubernetes.Interface, name string) {
	t.Helper()
	params, err := c.CoreV1().ConfigMaps(paramsNS).Get(t.Context(), paramsName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	names := params.Data["extendedResourceNames"]
	if names != "" {
		names += ","
	}
	params.Data["extendedResourceNames"] = names + name
	if _, err := c.CoreV1().ConfigMaps(paramsNS).Update(t.Context(), params, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	probe := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "declared-probe.example.com"},
		Spec: resourceapi.DeviceClassSpec{ExtendedResourceName: ptr.To(name)}}
	framework.WaitFor(t, "rota-extended-resources to see "+name+" declared", func(ctx context.Context) (bool, string, error) {
		_, err := c.ResourceV1().DeviceClasses().Create(ctx, probe, dryRun)
		return err == nil, fmt.Sprint(err), nil
	})
}

func contains(err error, wants ...string) bool {
	for _, w := range wants {
		if !strings.Contains(err.Error(), w) {
			return false
		}
	}
	return true
}
