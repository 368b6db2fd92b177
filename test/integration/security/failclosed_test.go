package security

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/test/integration/framework"
)

// TestFailClosedOnlyForGPUObjects: issue #38 point 3. Without the cluster
// admin's parameter object (an uninstall in the wrong order, a typo in its
// name), the policies refuse the GPU pods and reservation-tolerating claims
// they protect, and nothing else: kube-system's pods, Rota's own, a
// tenant's plain pods and another driver's claims are still created. The
// mark that scopes them cannot be dodged by a tenant's own labels.
func TestFailClosedOnlyForGPUObjects(t *testing.T) {
	e := setup(t)
	l := newLedger(t)
	ctx := context.Background()
	admin := e.cp.Client

	plainPod := func(namespace, name string) *v1.Pod {
		p := gpuPod(namespace, name, v1.DefaultSchedulerName)
		p.Spec.ResourceClaims, p.Spec.Containers[0].Resources = nil, v1.ResourceRequirements{}
		return p
	}
	// Another DRA driver's claim, which tolerates a taint of its own.
	otherDriverClaim := func(namespace, name string) *resourceapi.ResourceClaim {
		c := framework.DeviceClaim(namespace, name, 1)
		c.Spec.Devices.Requests[0].Exactly.DeviceClassName = "nic.example.com"
		c.Spec.Devices.Requests[0].Exactly.Tolerations = []resourceapi.DeviceToleration{{
			Key: "nic.example.com/maintenance", Operator: resourceapi.DeviceTolerationOpExists,
		}}
		return c
	}

	// With the parameter object: a tenant's own label does not take a pod
	// out of the checked set, whatever value it gives the mark.
	dodge := gpuPod(teamA, "dodge", "my-scheduler")
	dodge.Labels = map[string]string{gpuv1.AdmissionLabel: "skip"}
	l.hostile(t, "claim pod on another scheduler with the mark set to another value", func(ctx context.Context) error {
		_, err := e.alice.CoreV1().Pods(teamA).Create(ctx, dodge, dryRun)
		return err
	}, "rota-gpu-pods", "set spec.schedulerName: rota-scheduler")
	dodgeClaim := tolerating(teamA, "dodge", teamB, "r")
	dodgeClaim.Labels = map[string]string{gpuv1.AdmissionLabel: "skip"}
	l.hostile(t, "claim tolerating another namespace's reservation with the mark set to another value", func(ctx context.Context) error {
		_, err := e.alice.ResourceV1().ResourceClaims(teamA).Create(ctx, dodgeClaim, dryRun)
		return err
	}, "rota-reserved-gpu-tolerations")
	t.Run("the mark is set on the pods and claims that are checked, and only on them", func(t *testing.T) {
		p, err := e.alice.CoreV1().Pods(teamA).Create(ctx, gpuPod(teamA, "marked", v1.DefaultSchedulerName), dryRun)
		if err != nil || p.Labels[gpuv1.AdmissionLabel] != gpuv1.AdmissionChecked {
			t.Fatalf("GPU pod: %v, labels %v, want %s=%s", err, p.GetLabels(), gpuv1.AdmissionLabel, gpuv1.AdmissionChecked)
		}
		p, err = e.alice.CoreV1().Pods(teamA).Create(ctx, plainPod(teamA, "unmarked"), dryRun)
		if err != nil || p.Labels[gpuv1.AdmissionLabel] != "" {
			t.Fatalf("pod without devices: %v, labels %v, want no %s", err, p.GetLabels(), gpuv1.AdmissionLabel)
		}
		c, err := e.alice.ResourceV1().ResourceClaims(teamA).Create(ctx, tolerating(teamA, "marked", teamA, "r"), dryRun)
		if err != nil || c.Labels[gpuv1.AdmissionLabel] != gpuv1.AdmissionChecked {
			t.Fatalf("claim tolerating its own reservation: %v, labels %v, want the mark", err, c.GetLabels())
		}
		c, err = e.alice.ResourceV1().ResourceClaims(teamA).Create(ctx, framework.DeviceClaim(teamA, "unmarked", 1), dryRun)
		if err != nil || c.Labels[gpuv1.AdmissionLabel] != "" {
			t.Fatalf("claim without tolerations: %v, labels %v, want no mark", err, c.GetLabels())
		}
	})

	// The cluster admin's parameter object goes missing.
	if err := admin.CoreV1().ConfigMaps(paramsNS).Delete(ctx, paramsName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.WaitFor(t, "the API server to miss the parameter object", func(ctx context.Context) (bool, string, error) {
		_, err := e.alice.CoreV1().Pods(teamA).Create(ctx, gpuPod(teamA, "probe", v1.DefaultSchedulerName), dryRun)
		return err != nil, fmt.Sprint(err), nil
	})

	t.Run("without it, pods and claims Rota does not check are created", func(t *testing.T) {
		for _, c := range []struct {
			what   string
			create func(context.Context) error
		}{
			{"a kube-system pod", func(ctx context.Context) error {
				_, err := admin.CoreV1().Pods("kube-system").Create(ctx, plainPod("kube-system", "coredns-like"), dryRun)
				return err
			}},
			{"Rota's own pod in rota-system", func(ctx context.Context) error {
				_, err := admin.CoreV1().Pods(paramsNS).Create(ctx, plainPod(paramsNS, "rota-scheduler-like"), dryRun)
				return err
			}},
			{"a tenant's pod without devices", func(ctx context.Context) error {
				_, err := e.alice.CoreV1().Pods(teamA).Create(ctx, plainPod(teamA, "web"), dryRun)
				return err
			}},
			{"another driver's claim in kube-system", func(ctx context.Context) error {
				_, err := admin.ResourceV1().ResourceClaims("kube-system").Create(ctx, otherDriverClaim("kube-system", "nic"), dryRun)
				return err
			}},
			{"a tenant's claim that tolerates no reservation", func(ctx context.Context) error {
				_, err := e.alice.ResourceV1().ResourceClaims(teamA).Create(ctx, framework.DeviceClaim(teamA, "plain", 1), dryRun)
				return err
			}},
		} {
			if err := c.create(ctx); err != nil {
				t.Errorf("%s: %v, want it created", c.what, err)
			}
		}
	})

	l.hostile(t, "without the parameter object, a claim pod", func(ctx context.Context) error {
		_, err := e.alice.CoreV1().Pods(teamA).Create(ctx, gpuPod(teamA, "gpu", v1.DefaultSchedulerName), dryRun)
		return err
	}, "rota-gpu-pods", "no params found")
	l.hostile(t, "without the parameter object, a claim pod whose mark is set to another value", func(ctx context.Context) error {
		_, err := e.alice.CoreV1().Pods(teamA).Create(ctx, dodge, dryRun)
		return err
	}, "rota-gpu-pods", "no params found")
	l.hostile(t, "without the parameter object, a claim that tolerates a reservation", func(ctx context.Context) error {
		_, err := e.alice.ResourceV1().ResourceClaims(teamA).Create(ctx, tolerating(teamA, "held", teamA, "r"), dryRun)
		return err
	}, "rota-reserved-gpu-tolerations", "no params found")
	// Without it nobody knows which extended resources a DeviceClass
	// serves: a pod asking for any of them is refused.
	l.hostile(t, "without the parameter object, a pod asking for an extended resource a class may serve", func(ctx context.Context) error {
		p := plainPod(teamA, "extended")
		p.Spec.Containers[0].Resources.Limits = v1.ResourceList{"example.com/gpu": resource.MustParse("1")}
		_, err := e.alice.CoreV1().Pods(teamA).Create(ctx, p, dryRun)
		return err
	}, "rota-gpu-pods", "no params found")
}
