package schedule

import (
	"context"
	"fmt"
	"strings"
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/schedule/controller"
	"github.com/rota-dev/rota/test/integration/framework"
)

// gpuQuota is the namespace quota on Rota's DeviceClass as Kubernetes 1.37
// names it: "<class>.deviceclass.resource.k8s.io/devices".
const gpuQuota = v1.ResourceName(gpuv1.DeviceClassName + v1.ResourceClaimsPerClass)

// The namespace may hold 9 GPUs and holds 8 (qwen32b 6, md-bge-embed 2). At
// 08:00 stopping qwen32b frees 6 and llama70b would add 8: 10 > 9. The
// preflight refuses the transition before the release, so qwen32b keeps
// serving instead of being stopped for a model that could never start.
func TestQuotaRefusedReleasesNothing(t *testing.T) {
	e, obs := nightWorkloads(t, at(19, 7, 0), nightOptions{})
	quota := &v1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gpus"},
		Spec:       v1.ResourceQuotaSpec{Hard: v1.ResourceList{gpuQuota: resource.MustParse("9")}},
	}
	quota, err := e.cp.Client.CoreV1().ResourceQuotas(ns).Create(e.ctx, quota, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// No quota controller runs here; write the status it would write, so the
	// apiserver's quota admission enforces the quota too.
	quota.Status = v1.ResourceQuotaStatus{Hard: quota.Spec.Hard, Used: v1.ResourceList{gpuQuota: resource.MustParse("8")}}
	if _, err := e.cp.Client.CoreV1().ResourceQuotas(ns).UpdateStatus(e.ctx, quota, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The apiserver refuses a claim for 2 more GPUs under this resource name
	// (once its quota cache has the status): the controller's preflight reads
	// the quota Kubernetes enforces.
	framework.WaitFor(t, "the apiserver to refuse a claim over the quota", func(ctx context.Context) (bool, string, error) {
		_, err := e.cp.Client.ResourceV1().ResourceClaims(ns).Create(ctx, framework.DeviceClaim(ns, "probe", 2),
			metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "exceeded quota"), fmt.Sprint(err), nil
	})
	qwenPods := e.podNames("md-qwen32b")
	e.createSchedule(readExample(t, "deployschedule-week.yaml"))
	e.startController(nil)
	e.convergedSince(weekName, at(19, 7, 0), 50)

	e.clock.SetTime(at(19, 8, 0))
	llama := e.waitReason(weekName, "llama70b", v1alpha1.TargetPhaseFailed, controller.ReasonQuotaRefused, 50)
	expectTerminal(t, llama, v1alpha1.TargetPhaseFailed, controller.ReasonQuotaRefused,
		"starting 1 pod(s) of target llama70b would use 10 of "+string(gpuQuota)+" in ResourceQuota gpus (hard 9), counting what this transition releases first",
		"Raise the namespace ResourceQuota for the device class", "nothing was released")
	qwen := e.targetStatus(weekName, "qwen32b")
	expectTerminal(t, qwen, v1alpha1.TargetPhaseFailed, controller.ReasonTransitionAborted,
		"nothing was released: target llama70b failed its preflight (QuotaRefused)")
	if len(qwen.Steps) != 1 || qwen.Steps[0].SubmittedAt != nil {
		t.Errorf("qwen32b's stop was submitted: %s", describeSteps(qwen.Steps))
	}
	e.waitEvent(weekName, v1.EventTypeWarning, controller.ReasonQuotaRefused, "target llama70b: Failed", "ResourceQuota gpus")

	e.tick(12)
	e.expectUntouched(obs, "md-qwen32b", "md-llama70b", "md-bge-embed")
	if d := e.deployment("md-qwen32b"); d.Status.ReadyReplicas != 1 {
		t.Errorf("qwen32b ready replicas %d, want 1 (still serving)", d.Status.ReadyReplicas)
	}
	if got := e.podNames("md-qwen32b"); len(got) != 1 || got[0] != qwenPods[0] {
		t.Errorf("qwen32b pods %v, want the one it had (%v)", got, qwenPods)
	}
}

// An HPA scales llama70b and business hours pin its replicas: the target is
// Ineligible{UnsupportedScaleForMode}, found in the preflight, so qwen32b is
// not stopped either.
func TestIneligibleHPATarget(t *testing.T) {
	e, obs := nightWorkloads(t, at(19, 7, 0), nightOptions{})
	if _, err := e.cp.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Create(e.ctx, &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "md-llama70b"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "md-llama70b"},
			MinReplicas:    ptr.To[int32](1), MaxReplicas: 2,
			Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
				Name: v1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](80)},
			}}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ds := weekSchedule(t)
	stateOf(t, ds, "business-hours", "llama70b").Replicas = ptr.To(v1alpha1.Replicas(1))
	e.createScheduleObject(ds)
	e.startController(nil)
	// Outside business hours llama70b's intent (Stopped) pins nothing: eligible.
	e.convergedSince(weekName, at(19, 7, 0), 50)

	e.clock.SetTime(at(19, 8, 0))
	llama := e.waitReason(weekName, "llama70b", v1alpha1.TargetPhaseFailed, controller.ReasonIneligible, 50)
	expectTerminal(t, llama, v1alpha1.TargetPhaseFailed, controller.ReasonIneligible,
		"Ineligible{UnsupportedScaleForMode}: Deployment md-llama70b is scaled by HorizontalPodAutoscaler md-llama70b, and the intent pins replicas=1",
		"remove replicas from the window state or the HPA", "Fix: Fix the workload as the message says")
	qwen := e.targetStatus(weekName, "qwen32b")
	expectTerminal(t, qwen, v1alpha1.TargetPhaseFailed, controller.ReasonTransitionAborted,
		"nothing was released: target llama70b failed its preflight (Ineligible)")
	e.waitEvent(weekName, v1.EventTypeWarning, controller.ReasonIneligible, "target llama70b: Failed", "UnsupportedScaleForMode")

	e.tick(12)
	e.expectUntouched(obs, "md-qwen32b", "md-llama70b", "md-bge-embed")
	// Eligibility is re-checked every pass: the reason stays while the HPA does.
	if st := e.targetStatus(weekName, "llama70b"); st.Reason != controller.ReasonIneligible {
		t.Errorf("llama70b after a minute: %s", describe(st))
	}
}

// Another object controls md-llama70b (an operator's resource; here a
// ConfigMap stands in for it): at 08:00 the target is
// Ineligible{ManagedByController}, naming the controller, and nothing is
// released or started, since that controller would undo the scale.
func TestIneligibleControlledTarget(t *testing.T) {
	e, obs := nightWorkloads(t, at(19, 7, 0), nightOptions{})
	e.createScheduleObject(weekSchedule(t))
	e.startController(nil)
	e.convergedSince(weekName, at(19, 7, 0), 50)

	owner, err := e.cp.Client.CoreV1().ConfigMaps(ns).Create(e.ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "llama-operator"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d := e.deployment("md-llama70b")
	d.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID, Controller: ptr.To(true)}}
	if _, err := e.cp.Client.AppsV1().Deployments(ns).Update(e.ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	e.clock.SetTime(at(19, 8, 0))
	llama := e.waitReason(weekName, "llama70b", v1alpha1.TargetPhaseFailed, controller.ReasonIneligible, 50)
	expectTerminal(t, llama, v1alpha1.TargetPhaseFailed, controller.ReasonIneligible,
		"Ineligible{ManagedByController}: Deployment md-llama70b is controlled by ConfigMap llama-operator",
		"schedule the ConfigMap instead, or remove its controller reference")
	qwen := e.targetStatus(weekName, "qwen32b")
	expectTerminal(t, qwen, v1alpha1.TargetPhaseFailed, controller.ReasonTransitionAborted,
		"nothing was released: target llama70b failed its preflight (Ineligible)")
	e.tick(12)
	e.expectUntouched(obs, "md-qwen32b", "md-bge-embed")
	if r := e.replicas("md-llama70b"); r != 0 {
		t.Errorf("llama70b started although another controller owns it: replicas %d", r)
	}
}
