package framework

import (
	"context"
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// DefaultTimeout bounds every wait; a scheduling decision here takes well
// under a second, so reaching it means something is wrong, not slow.
const DefaultTimeout = 30 * time.Second

// WaitFor polls check until it reports done. On timeout the test fails with
// what and the last state check described, so a failure says what was seen.
func WaitFor(tb testing.TB, what string, check func(ctx context.Context) (done bool, state string, err error)) {
	tb.Helper()
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, DefaultTimeout, true,
		func(ctx context.Context) (bool, error) {
			done, state, err := check(ctx)
			last = state
			return done, err
		})
	if err != nil {
		tb.Fatalf("waiting for %s: %v; last seen: %s", what, err, last)
	}
}

// WaitForPodBound waits until the pod exists (a controller may create it
// later) and has a node, and returns it.
func (cp *ControlPlane) WaitForPodBound(tb testing.TB, namespace, name string) *v1.Pod {
	tb.Helper()
	var pod *v1.Pod
	WaitFor(tb, fmt.Sprintf("pod %s/%s to be bound", namespace, name), func(ctx context.Context) (bool, string, error) {
		p, err := cp.Client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, "not created yet", nil
		}
		if err != nil {
			return false, "", err
		}
		pod = p
		return p.Spec.NodeName != "", describePodScheduling(p), nil
	})
	return pod
}

// PodClaim returns the allocated ResourceClaim generated for the pod's claim
// entry claimName, waiting until the allocation is there.
func (cp *ControlPlane) PodClaim(tb testing.TB, pod *v1.Pod, claimName string) *resourceapi.ResourceClaim {
	tb.Helper()
	var claim *resourceapi.ResourceClaim
	WaitFor(tb, fmt.Sprintf("claim %q of pod %s/%s to be allocated", claimName, pod.Namespace, pod.Name), func(ctx context.Context) (bool, string, error) {
		p, err := cp.Client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		var generated string
		for _, s := range p.Status.ResourceClaimStatuses {
			if s.Name == claimName && s.ResourceClaimName != nil {
				generated = *s.ResourceClaimName
			}
		}
		if generated == "" {
			return false, "no ResourceClaim generated yet", nil
		}
		c, err := cp.Client.ResourceV1().ResourceClaims(pod.Namespace).Get(ctx, generated, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		claim = c
		return c.Status.Allocation != nil, fmt.Sprintf("claim %s allocation=%v", c.Name, c.Status.Allocation != nil), nil
	})
	return claim
}

// describePodScheduling summarises why a pod is or is not bound.
func describePodScheduling(p *v1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodScheduled {
			return fmt.Sprintf("node=%q PodScheduled=%s reason=%s message=%q", p.Spec.NodeName, c.Status, c.Reason, c.Message)
		}
	}
	return fmt.Sprintf("node=%q, no PodScheduled condition", p.Spec.NodeName)
}
