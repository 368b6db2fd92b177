package security

import (
	"context"
	"fmt"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/rota-dev/rota/test/integration/framework"
)

// TestDriverWritesOnlyItsNode: the DRA plugin's token is bound to its pod
// and node; the shipped policy rota-dra-kubelet-plugin-own-node keeps its
// ResourceSlice writes to that node and to its own driver, through v1 and,
// converted (matchPolicy Equivalent), through resource.k8s.io/v1beta2.
func TestDriverWritesOnlyItsNode(t *testing.T) {
	e := setup(t)
	l := newLedger(t)
	// What a pod-bound token of the plugin on node-a carries.
	cfg := e.cp.ImpersonateServiceAccount("rota-system", "rota-dra-kubelet-plugin")
	cfg.Impersonate.Extra = map[string][]string{"authentication.kubernetes.io/node-name": {"node-a"}}
	plugin, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	pluginDyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	gpu := framework.GPU{Model: "H100", Architecture: "Hopper", MemoryGiB: 80}
	framework.WaitFor(t, "the plugin's RBAC and policy to decide", func(ctx context.Context) (bool, string, error) {
		_, err := plugin.ResourceV1().ResourceSlices().Create(ctx, framework.GPUSlice("node-a", gpu), dryRun)
		if err != nil {
			return false, err.Error(), nil
		}
		_, err = plugin.ResourceV1().ResourceSlices().Create(ctx, framework.GPUSlice("node-b", gpu), dryRun)
		return err != nil, fmt.Sprint(err), nil
	})

	l.hostile(t, "driver token publishes GPUs for another node", func(ctx context.Context) error {
		_, err := plugin.ResourceV1().ResourceSlices().Create(ctx, framework.GPUSlice("node-b", gpu), dryRun)
		return err
	}, "rota-dra-kubelet-plugin-own-node", "may only change its ResourceSlices")
	l.hostile(t, "driver token publishes GPUs for another node through v1beta2", func(ctx context.Context) error {
		u := &unstructured.Unstructured{}
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(framework.GPUSlice("node-b", gpu))
		if err != nil {
			return nil
		}
		u.Object = obj
		u.SetAPIVersion("resource.k8s.io/v1beta2")
		u.SetKind("ResourceSlice")
		_, err = pluginDyn.Resource(schema.GroupVersionResource{Group: "resource.k8s.io", Version: "v1beta2", Resource: "resourceslices"}).
			Create(ctx, u, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}, "rota-dra-kubelet-plugin-own-node", "may only change its ResourceSlices")

	// Another DRA driver's slice on the plugin's own node (a NIC, an FPGA):
	// RBAC lets the token write every ResourceSlice, the policy only
	// gpu.rota.dev's.
	other := otherDriverSlice("node-a")
	if _, err := e.cp.Client.ResourceV1().ResourceSlices().Create(t.Context(), other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	l.hostile(t, "driver token publishes devices of another driver on its own node", func(ctx context.Context) error {
		s := otherDriverSlice("node-a")
		s.Name += "-forged"
		_, err := plugin.ResourceV1().ResourceSlices().Create(ctx, s, dryRun)
		return err
	}, "rota-dra-kubelet-plugin-own-node", "may only change the ResourceSlices of driver gpu.rota.dev")
	l.hostile(t, "driver token rewrites another driver's slice on its own node", func(ctx context.Context) error {
		s, err := plugin.ResourceV1().ResourceSlices().Get(ctx, other.Name, metav1.GetOptions{})
		if err != nil {
			return nil
		}
		s.Spec.Devices = s.Spec.Devices[:0]
		_, err = plugin.ResourceV1().ResourceSlices().Update(ctx, s, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}, "rota-dra-kubelet-plugin-own-node", "may only change the ResourceSlices of driver gpu.rota.dev")
	l.hostile(t, "driver token deletes another driver's slice on its own node", func(ctx context.Context) error {
		return plugin.ResourceV1().ResourceSlices().Delete(ctx, other.Name, metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
	}, "rota-dra-kubelet-plugin-own-node", "may only change the ResourceSlices of driver gpu.rota.dev")

	// Its own slice on its own node it still publishes, rewrites and deletes.
	own, err := plugin.ResourceV1().ResourceSlices().Create(t.Context(), framework.GPUSlice("node-a", gpu), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("the plugin publishes its own node's GPUs: %v", err)
	}
	own.Spec.Devices = own.Spec.Devices[:0]
	if _, err := plugin.ResourceV1().ResourceSlices().Update(t.Context(), own, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("the plugin rewrites its own slice: %v", err)
	}
	if err := plugin.ResourceV1().ResourceSlices().Delete(t.Context(), own.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("the plugin deletes its own slice: %v", err)
	}
}

// otherDriverSlice is one device of another DRA driver on node.
func otherDriverSlice(node string) *resourceapi.ResourceSlice {
	s := framework.GPUSlice(node, framework.GPU{Model: "ConnectX-7", MemoryGiB: 1})
	s.Name = node + "-nic.example.com"
	s.Spec.Driver = "nic.example.com"
	return s
}
