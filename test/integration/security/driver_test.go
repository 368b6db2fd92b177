package security

import (
	"context"
	"fmt"
	"testing"

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
// ResourceSlice writes to that node, through v1 and, converted
// (matchPolicy Equivalent), through resource.k8s.io/v1beta2.
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
}
