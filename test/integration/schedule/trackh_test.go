package schedule

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	rsv "github.com/rota-dev/rota/pkg/reservation"
	reservationcontroller "github.com/rota-dev/rota/pkg/reservation/controller"
	"github.com/rota-dev/rota/test/integration/framework"
)

// Track H end to end (docs/schedule.md, "Track H"): a DeploySchedule target
// bound to a GPUReservation starts, in the transition's one workload write,
// on a copy of its claim template that selects the held GPUs and tolerates
// the reservation's taint. The real reservation controller holds two GPUs in
// the middle of an 8-GPU node with DeviceTaintRules; the real scheduler
// (DynamicResources and Rota's Reservation plugin) places the member on
// exactly those GPUs, and a non-member never gets them.
func TestTrackHPinsTargetToReservation(t *testing.T) {
	const node = "gpu-node-a"
	e := newEnv(t, at(19, 7, 0), map[string]int{node: 8})
	e.startReservationController()
	held := []string{fmt.Sprintf("GPU-%s-5", node), fmt.Sprintf("GPU-%s-6", node)}
	e.createReservation(&v1alpha1.GPUReservation{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "llama-gpus"},
		Spec: v1alpha1.GPUReservationSpec{NodeName: node, DeviceUUIDs: held, Members: []v1alpha1.ReservationMember{
			{Name: "llama", WorkloadRef: v1alpha1.WorkloadReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "md-llama"}},
		}},
	})
	e.advance("GPUReservation llama-gpus Bound", 100, func() (bool, string) {
		r := e.reservation("llama-gpus")
		return r.Status.Phase == v1alpha1.ReservationBound && len(r.Status.Devices) == 2, fmt.Sprintf("%s %+v", r.Status.Phase, r.Status.Devices)
	})
	pods := watchPodTemplates(t, e, "md-llama")

	// md-llama's template asks for two GPUs of Rota's class, nothing more.
	e.gpuDeployment("md-llama", 0, 2)
	e.gpuDeployment("md-batch", 1, 4)
	e.waitReady("md-batch", 1)
	e.createSchedule(`
apiVersion: rota.dev/v1alpha1
kind: DeploySchedule
metadata: {name: pinned, namespace: serving}
spec:
  timeZone: Asia/Ho_Chi_Minh
  mode: Enforce
  targets:
  - name: llama
    workloadRef: {apiVersion: apps/v1, kind: Deployment, name: md-llama}
    reservationName: llama-gpus
    defaultState: Stopped
  windows:
  - name: business-hours
    recurring: {cron: "0 8 * * 1-5", duration: 10h}
    states:
    - {target: llama, desiredState: Running, replicas: 1}
`)
	// The controller writes as its ServiceAccount under the shipped writes
	// policy: the pinned copy and the pin itself are writes it allows.
	applyManifestFile(t, e.cp, "manifests/schedule-controller/writes-policy.yaml")
	client, dyn := asController(t, e.cp)
	waitWritesPolicy(t, client, "md-batch")
	e.startControllerAs(client, dyn, nil)
	e.convergedSince("pinned", at(19, 7, 0), 50)

	// 08:00: the acquire step scales md-llama to 1 and points it at the
	// pinned copy in the same write.
	e.clock.SetTime(at(19, 8, 0))
	e.convergedSince("pinned", at(19, 8, 0), 200)
	d := e.deployment("md-llama")
	pinned := ptr.Deref(d.Spec.Template.Spec.ResourceClaims[0].ResourceClaimTemplateName, "")
	if !strings.HasPrefix(pinned, "md-llama-gpus-pin-") || ptr.Deref(d.Spec.Replicas, 0) != 1 {
		t.Fatalf("md-llama: template %q, replicas %d; want a md-llama-gpus-pin-* copy and 1", pinned, ptr.Deref(d.Spec.Replicas, 0))
	}
	tmpl, err := e.cp.Client.ResourceV1().ResourceClaimTemplates(ns).Get(e.ctx, pinned, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := tmpl.Annotations[gpuv1.ReservationAnnotation]; got != "llama-gpus" {
		t.Errorf("pinned template names reservation %q, want llama-gpus", got)
	}
	if got, want := tmpl.Spec.Spec.Devices.Requests[0].Exactly.Tolerations, rsv.Toleration(ns, "llama-gpus"); len(got) != 1 || got[0] != want {
		t.Errorf("pinned template tolerations %+v, want [%+v]", got, want)
	}
	// Where the member runs: on the held GPUs, found by the allocator
	// through the selector and the taint the toleration lifts.
	llama := e.pods("md-llama")
	if len(llama) != 1 {
		t.Fatalf("%d md-llama pods, want 1", len(llama))
	}
	if got := e.claimDevices(&llama[0]); !slices.Equal(got, []string{"gpu-5", "gpu-6"}) {
		t.Errorf("md-llama holds %v, want the held [gpu-5 gpu-6]", got)
	}
	// Every md-llama pod ever created used the pinned copy: no pod on the
	// original template came between the scale-up and the pin.
	for name, tmplName := range pods.seen() {
		if tmplName != pinned {
			t.Errorf("pod %s was created from template %q, want only %s", name, tmplName, pinned)
		}
	}
	// The reservation's witness sees its member converged on the held GPUs.
	e.advance("member llama converged", 100, func() (bool, string) {
		r := e.reservation("llama-gpus")
		for _, m := range r.Status.Members {
			if m.Name == "llama" && m.Pods == 1 && m.Placement == reservationcontroller.PlacementConverged {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%+v", r.Status.Members)
	})

	// A non-member scaled up while llama runs gets the two unreserved GPUs
	// left (gpu-4, gpu-7) only if it fits in them: a second md-batch replica
	// (4 GPUs) does not, although 4 GPUs are idle or held.
	e.scaleByHand("md-batch", 2)
	e.advance("second md-batch pod refused", 100, func() (bool, string) {
		for _, p := range e.pods("md-batch") {
			if p.Spec.NodeName == "" {
				for _, c := range p.Status.Conditions {
					if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse {
						return true, c.Message
					}
				}
			}
		}
		return false, "not tried yet"
	})

	// 18:00 stops md-llama; Tuesday 08:00 starts it on the same pinned copy.
	e.clock.SetTime(at(19, 18, 0))
	e.convergedSince("pinned", at(19, 18, 0), 200)
	e.clock.SetTime(at(20, 8, 0))
	e.convergedSince("pinned", at(20, 8, 0), 200)
	if got := ptr.Deref(e.deployment("md-llama").Spec.Template.Spec.ResourceClaims[0].ResourceClaimTemplateName, ""); got != pinned {
		t.Errorf("Tuesday: md-llama on template %q, want the same %s", got, pinned)
	}
	llama = e.pods("md-llama")
	if len(llama) != 1 || !slices.Equal(e.claimDevices(&llama[0]), []string{"gpu-5", "gpu-6"}) {
		t.Errorf("Tuesday: md-llama pods %d, want one on [gpu-5 gpu-6]", len(llama))
	}
}

// startReservationController runs the GPUReservation controller as the
// schedule-controller binary does, until the test ends.
func (e *env) startReservationController() {
	e.t.Helper()
	framework.StartReservationController(e.t, e.cp.Client, e.cp.Dynamic)
}

func (e *env) createReservation(r *v1alpha1.GPUReservation) {
	e.t.Helper()
	u, err := rsv.ToUnstructured(r)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.cp.Dynamic.Resource(v1alpha1.GPUReservationsResource).Namespace(r.Namespace).Create(e.ctx, u, metav1.CreateOptions{}); err != nil {
		e.t.Fatalf("create GPUReservation %s: %v", r.Name, err)
	}
}

func (e *env) reservation(name string) *v1alpha1.GPUReservation {
	e.t.Helper()
	u, err := e.cp.Dynamic.Resource(v1alpha1.GPUReservationsResource).Namespace(ns).Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	r, err := rsv.FromObject(u)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// claimDevices is the devices allocated to the pod's claim "gpu", sorted.
func (e *env) claimDevices(p *v1.Pod) []string {
	e.t.Helper()
	var claim string
	for _, s := range p.Status.ResourceClaimStatuses {
		if s.Name == "gpu" {
			claim = ptr.Deref(s.ResourceClaimName, "")
		}
	}
	c, err := e.cp.Client.ResourceV1().ResourceClaims(ns).Get(e.ctx, claim, metav1.GetOptions{})
	if err != nil || c.Status.Allocation == nil {
		e.t.Fatalf("claim %q of pod %s: %v (allocated: %t)", claim, p.Name, err, err == nil && c.Status.Allocation != nil)
	}
	var out []string
	for _, r := range c.Status.Allocation.Devices.Results {
		out = append(out, r.Device)
	}
	slices.Sort(out)
	return out
}

// podTemplates records, from a watch, the claim template every pod of an
// app was created with.
type podTemplates struct {
	mu   sync.Mutex
	byID map[string]string
}

func (p *podTemplates) seen() map[string]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.byID)
}

func watchPodTemplates(t *testing.T, e *env, app string) *podTemplates {
	w, err := e.cp.Client.CoreV1().Pods(ns).Watch(context.Background(), metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		t.Fatal(err)
	}
	p := &podTemplates{byID: map[string]string{}}
	var wg sync.WaitGroup
	wg.Go(func() {
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*v1.Pod)
			if !ok || ev.Type != watch.Added || len(pod.Spec.ResourceClaims) == 0 {
				continue
			}
			p.mu.Lock()
			p.byID[pod.Name] = ptr.Deref(pod.Spec.ResourceClaims[0].ResourceClaimTemplateName, "")
			p.mu.Unlock()
		}
	})
	t.Cleanup(func() { w.Stop(); wg.Wait() })
	return p
}
