package e2enode

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// waitForNodeReady waits until the kubelet has registered the node and
// reports it Ready.
func (c *e2eCluster) waitForNodeReady(ctx context.Context, timeout time.Duration) error {
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		n, err := c.client.CoreV1().Nodes().Get(ctx, c.nodeName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				return cond.Status == corev1.ConditionTrue, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("node %s not Ready after %s (kubelet log: %s/kubelet.log): %w", c.nodeName, timeout, c.node.LogDir(), err)
	}
	return nil
}

// deletePods deletes every pod of ns and waits until the kubelet has
// stopped them and they are gone.
func (c *e2eCluster) deletePods(ctx context.Context, ns string, timeout time.Duration) error {
	if err := c.client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		return fmt.Errorf("deleting the pods of %s: %w", ns, err)
	}
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		pods, err := c.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(pods.Items) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("pods of %s still there after %s: %w\n%s", ns, timeout, err, c.podSummary(ctx, ns))
	}
	return nil
}

// podSummary says, for a failure message, where each pod of ns stands.
func (c *e2eCluster) podSummary(ctx context.Context, ns string) string {
	pods, err := c.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, p := range pods.Items {
		fmt.Fprintf(&b, "pod %s/%s: phase %s node %q", p.Namespace, p.Name, p.Status.Phase, p.Spec.NodeName)
		for _, cond := range p.Status.Conditions {
			if cond.Status != corev1.ConditionTrue {
				fmt.Fprintf(&b, "; %s=%s %s %s", cond.Type, cond.Status, cond.Reason, cond.Message)
			}
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.State.Waiting != nil {
				fmt.Fprintf(&b, "; %s waiting: %s %s", cs.Name, cs.State.Waiting.Reason, cs.State.Waiting.Message)
			}
			if cs.LastTerminationState.Terminated != nil {
				fmt.Fprintf(&b, "; %s last exit %d %s", cs.Name, cs.LastTerminationState.Terminated.ExitCode, cs.LastTerminationState.Terminated.Reason)
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}
