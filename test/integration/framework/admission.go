package framework

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
)

// StartSchedulerWithPluginArgs runs the shipped scheduler configuration
// with the args of the named plugins replaced (plugin name → args object,
// encoded as YAML), e.g. a Quota plugin with test tenants.
func (cp *ControlPlane) StartSchedulerWithPluginArgs(tb testing.TB, args map[string]any) {
	tb.Helper()
	path := cp.SchedulerConfig(tb)
	data, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		tb.Fatal(err)
	}
	profiles, _ := cfg["profiles"].([]any)
	for _, p := range profiles {
		profile, _ := p.(map[string]any)
		pcs, _ := profile["pluginConfig"].([]any)
		done := map[string]bool{}
		for _, pc := range pcs {
			m, _ := pc.(map[string]any)
			name := fmt.Sprint(m["name"])
			if a, ok := args[name]; ok {
				m["args"] = a
				done[name] = true
			}
		}
		for name, a := range args {
			if !done[name] {
				pcs = append(pcs, map[string]any{"name": name, "args": a})
			}
		}
		profile["pluginConfig"] = pcs
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(path, out, 0o600); err != nil {
		tb.Fatal(err)
	}
	cp.startSchedulerFrom(tb, path)
}

// DeviceClaim returns a ResourceClaim asking for count devices of Rota's
// class, narrowed by cel; pods that share it land on the node its devices
// are on, together (ClaimPod).
func DeviceClaim(namespace, name string, count int64, cel ...string) *resourceapi.ResourceClaim {
	req := &resourceapi.ExactDeviceRequest{DeviceClassName: gpuv1.DeviceClassName, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count}
	for _, e := range cel {
		req.Selectors = append(req.Selectors, resourceapi.DeviceSelector{CEL: &resourceapi.CELDeviceSelector{Expression: e}})
	}
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: req}},
		}},
	}
}

// ClaimPod returns a pod for schedulerName that uses the existing
// ResourceClaim claim as its "gpu".
func ClaimPod(namespace, name, schedulerName, claim string) *v1.Pod {
	pod := GPUPod(namespace, name, schedulerName, "")
	pod.Spec.ResourceClaims[0].ResourceClaimTemplateName = nil
	pod.Spec.ResourceClaims[0].ResourceClaimName = ptr.To(claim)
	return pod
}

// OnNode restricts pod to node with a node selector and returns it.
func OnNode(pod *v1.Pod, node string) *v1.Pod {
	pod.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": node}
	return pod
}

// WithLabels adds labels to pod and returns it.
func WithLabels(pod *v1.Pod, labels map[string]string) *v1.Pod {
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	for k, v := range labels {
		pod.Labels[k] = v
	}
	return pod
}

// WaitForWaiting waits until the pod's rota.dev/Waiting condition is True
// with reason and a message containing every one of wants, and returns
// the message.
func (cp *ControlPlane) WaitForWaiting(tb testing.TB, namespace, name, reason string, wants ...string) string {
	tb.Helper()
	var msg string
	WaitFor(tb, fmt.Sprintf("pod %s/%s to wait with %s %q", namespace, name, reason, wants), func(ctx context.Context) (bool, string, error) {
		p, err := cp.Client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		for _, c := range p.Status.Conditions {
			if c.Type != gpuv1.WaitingCondition {
				continue
			}
			msg = c.Message
			state := fmt.Sprintf("%s=%s reason=%s message=%q", c.Type, c.Status, c.Reason, c.Message)
			if c.Status != v1.ConditionTrue || c.Reason != reason {
				return false, state, nil
			}
			for _, w := range wants {
				if !strings.Contains(c.Message, w) {
					return false, state, nil
				}
			}
			return true, state, nil
		}
		return false, "no " + string(gpuv1.WaitingCondition) + " condition; " + describePodScheduling(p), nil
	})
	return msg
}

// AllocatedDevices lists every allocated device as "pool/device" with the
// claims holding it, and fails the test if a device that cannot be shared
// is held by two claims.
func (cp *ControlPlane) AllocatedDevices(tb testing.TB) map[string][]string {
	tb.Helper()
	ctx := context.Background()
	claims, err := cp.Client.ResourceV1().ResourceClaims("").List(ctx, metav1.ListOptions{})
	if err != nil {
		tb.Fatalf("list claims: %v", err)
	}
	held := map[string][]string{}
	for _, c := range claims.Items {
		if c.Status.Allocation == nil {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			if r.ShareID != nil {
				continue
			}
			key := r.Pool + "/" + r.Device
			held[key] = append(held[key], c.Namespace+"/"+c.Name)
		}
	}
	var double []string
	for dev, cs := range held {
		if len(cs) > 1 {
			sort.Strings(cs)
			double = append(double, fmt.Sprintf("%s held by %v", dev, cs))
		}
	}
	if len(double) > 0 {
		sort.Strings(double)
		tb.Fatalf("double-booked GPUs: %s", strings.Join(double, "; "))
	}
	return held
}
