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
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
)

// UnhealthyTaint is the device taint Rota's driver puts on a failed GPU.
var UnhealthyTaint = resourceapi.DeviceTaint{Key: gpuv1.DriverName + "/unhealthy", Value: "xid-79", Effect: resourceapi.DeviceTaintEffectNoSchedule}

// MinMemoryTier selects GPUs of a model with at least minGiB of memory.
func MinMemoryTier(model string, minGiB int64) Tier {
	return Tier{
		Name: strings.ToLower(model),
		CEL: fmt.Sprintf("device.attributes[%q].model == %q && device.capacity[%q].memory.compareTo(quantity(%q)) >= 0",
			gpuv1.DriverName, model, gpuv1.DriverName, fmt.Sprintf("%dGi", minGiB)),
	}
}

// WithCPU sets the CPU request of every container of pod.
func WithCPU(pod *v1.Pod, cpu string) *v1.Pod {
	for i := range pod.Spec.Containers {
		pod.Spec.Containers[i].Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu)}
	}
	return pod
}

// BoundPod returns a pod without claims already bound to node, as if an
// earlier scheduler had placed it, requesting cpu.
func BoundPod(namespace, name, node, cpu string) *v1.Pod {
	return WithCPU(&v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: v1.PodSpec{
			NodeName:   node,
			Containers: []v1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10"}},
		},
	}, cpu)
}

// SetDeviceTaints replaces the taints of one device in the node's GPU
// slice, the way the driver marks a GPU unhealthy or healed.
func (cp *ControlPlane) SetDeviceTaints(tb testing.TB, node, device string, taints ...resourceapi.DeviceTaint) {
	tb.Helper()
	ctx := context.Background()
	name := node + "-" + gpuv1.DriverName
	slice, err := cp.Client.ResourceV1().ResourceSlices().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		tb.Fatalf("get ResourceSlice %s: %v", name, err)
	}
	found := false
	for i := range slice.Spec.Devices {
		if slice.Spec.Devices[i].Name == device {
			slice.Spec.Devices[i].Taints = taints
			found = true
		}
	}
	if !found {
		tb.Fatalf("ResourceSlice %s has no device %s", name, device)
	}
	if _, err := cp.Client.ResourceV1().ResourceSlices().Update(ctx, slice, metav1.UpdateOptions{}); err != nil {
		tb.Fatalf("update ResourceSlice %s: %v", name, err)
	}
}

// DeletePodNow deletes a pod without grace period, as the kubelet would
// once it stopped, and waits until its claims no longer hold devices.
func (cp *ControlPlane) DeletePodNow(tb testing.TB, namespace, name string) {
	tb.Helper()
	ctx := context.Background()
	pod, err := cp.Client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		tb.Fatalf("get pod %s/%s: %v", namespace, name, err)
	}
	if err := cp.Client.CoreV1().Pods(namespace).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		tb.Fatalf("delete pod %s/%s: %v", namespace, name, err)
	}
	for _, s := range pod.Status.ResourceClaimStatuses {
		if s.ResourceClaimName == nil {
			continue
		}
		claim := *s.ResourceClaimName
		WaitFor(tb, fmt.Sprintf("claim %s/%s to release its devices", namespace, claim), func(ctx context.Context) (bool, string, error) {
			c, err := cp.Client.ResourceV1().ResourceClaims(namespace).Get(ctx, claim, metav1.GetOptions{})
			if err != nil {
				return true, "gone", nil //nolint:nilerr // deleted claims hold nothing
			}
			return c.Status.Allocation == nil, fmt.Sprintf("allocated=%v reservedFor=%d", c.Status.Allocation != nil, len(c.Status.ReservedFor)), nil
		})
	}
}

// PodEventNotes returns the notes (messages) of the pod's events with reason,
// oldest first, as `kubectl describe pod` lists them.
func (cp *ControlPlane) PodEventNotes(tb testing.TB, pod *v1.Pod, reason string) []string {
	tb.Helper()
	list, err := cp.Client.CoreV1().Events(pod.Namespace).List(context.Background(), metav1.ListOptions{
		FieldSelector: fields.Set{"involvedObject.name": pod.Name, "reason": reason}.String(),
	})
	if err != nil {
		tb.Fatalf("list events of pod %s/%s: %v", pod.Namespace, pod.Name, err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].CreationTimestamp.Before(&list.Items[j].CreationTimestamp) })
	var notes []string
	for _, e := range list.Items {
		notes = append(notes, e.Message)
	}
	return notes
}

// WaitForPodUnschedulable waits until the scheduler reports the pod
// unschedulable with a message containing every one of wants, and returns
// the message.
func (cp *ControlPlane) WaitForPodUnschedulable(tb testing.TB, namespace, name string, wants ...string) string {
	tb.Helper()
	var msg string
	WaitFor(tb, fmt.Sprintf("pod %s/%s to be unschedulable with %q", namespace, name, wants), func(ctx context.Context) (bool, string, error) {
		p, err := cp.Client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		for _, c := range p.Status.Conditions {
			if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse && c.Reason == v1.PodReasonUnschedulable {
				msg = c.Message
			}
		}
		for _, w := range wants {
			if !strings.Contains(msg, w) {
				return false, describePodScheduling(p), nil
			}
		}
		return msg != "", describePodScheduling(p), nil
	})
	return msg
}

// WaitForPodAnnotation waits until the pod carries annotation key and
// returns its value.
func (cp *ControlPlane) WaitForPodAnnotation(tb testing.TB, namespace, name, key string) string {
	tb.Helper()
	var value string
	WaitFor(tb, fmt.Sprintf("pod %s/%s to have annotation %s", namespace, name, key), func(ctx context.Context) (bool, string, error) {
		p, err := cp.Client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		v, ok := p.Annotations[key]
		value = v
		return ok, fmt.Sprintf("annotations=%v", p.Annotations), nil
	})
	return value
}

// StartSchedulerWithout runs the shipped scheduler configuration with the
// named plugins removed from the rota-scheduler profile — the stock
// kube-scheduler behaviour Rota is compared against. Apart from the
// configuration it starts the scheduler exactly like StartScheduler.
func (cp *ControlPlane) StartSchedulerWithout(tb testing.TB, plugins ...string) {
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
	drop := map[string]bool{}
	for _, p := range plugins {
		drop[p] = true
	}
	profiles, _ := cfg["profiles"].([]any)
	for _, p := range profiles {
		profile, _ := p.(map[string]any)
		delete(profile, "plugins")
		var keep []any
		pcs, _ := profile["pluginConfig"].([]any)
		for _, pc := range pcs {
			if m, _ := pc.(map[string]any); !drop[fmt.Sprint(m["name"])] {
				keep = append(keep, pc)
			}
		}
		profile["pluginConfig"] = keep
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
