package integration

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/rota-dev/rota/pkg/driver/config"
	"github.com/rota-dev/rota/test/integration/framework"
)

// TestDriverManifestsAreAccepted creates every object of manifests/driver in a
// real API server (namespace first) and decodes every GpuConfig they carry
// with the driver's own strict decoder.
func TestDriverManifestsAreAccepted(t *testing.T) {
	ctx := context.Background()
	cp := framework.StartControlPlane(t)
	cp.Create(t, framework.Namespace("ml"))
	groups, err := restmapper.GetAPIGroupResources(cp.Client.Discovery())
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDiscoveryRESTMapper(groups)
	dir := filepath.Join(framework.RepoRoot(t), "manifests", "driver")
	files := []string{"namespace.yaml", "rbac.yaml", "deviceclass.yaml", "daemonset.yaml", "claimtemplates-example.yaml"}
	configs := 0
	for _, file := range files {
		data, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			var obj unstructured.Unstructured
			if err := dec.Decode(&obj.Object); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			if len(obj.Object) == 0 {
				continue
			}
			gvk := obj.GroupVersionKind()
			if gvk.Kind == "DaemonSet" {
				// The test API server runs without --allow-privileged; the
				// real cluster needs it for nvidia-smi compute-policy.
				withoutPrivileged(t, &obj)
			}
			m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			if err != nil {
				t.Fatalf("%s: %s: %v", file, gvk, err)
			}
			ri := cp.Dynamic.Resource(m.Resource)
			var created *unstructured.Unstructured
			if obj.GetNamespace() != "" {
				created, err = ri.Namespace(obj.GetNamespace()).Create(ctx, &obj, metav1.CreateOptions{FieldValidation: "Strict"})
			} else {
				created, err = ri.Create(ctx, &obj, metav1.CreateOptions{FieldValidation: "Strict"})
			}
			if err != nil {
				t.Errorf("%s: creating %s %s: %v", file, gvk.Kind, obj.GetName(), err)
				continue
			}
			configs += decodeGpuConfigs(t, file+" "+created.GetName(), created.Object)
		}
	}
	if configs != 2 {
		t.Errorf("found %d GpuConfigs in the manifests, want 2 (time-sliced class, H200 share template)", configs)
	}
}

// decodeGpuConfigs finds opaque parameters for gpu.rota.dev anywhere in obj
// and decodes them strictly.
func decodeGpuConfigs(t *testing.T, where string, obj any) int {
	n := 0
	switch v := obj.(type) {
	case map[string]any:
		if v["driver"] == "gpu.rota.dev" && v["parameters"] != nil {
			raw, err := yaml.Marshal(v["parameters"])
			if err == nil {
				raw, err = yaml.YAMLToJSON(raw)
			}
			if err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			if _, err := config.Decode(raw); err != nil {
				t.Errorf("%s: GpuConfig %s: %v", where, raw, err)
			}
			n++
		}
		for _, child := range v {
			n += decodeGpuConfigs(t, where, child)
		}
	case []any:
		for _, child := range v {
			n += decodeGpuConfigs(t, where, child)
		}
	}
	return n
}

func withoutPrivileged(t *testing.T, obj *unstructured.Unstructured) {
	containers, _, err := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range containers {
		if sc, ok := c.(map[string]any)["securityContext"].(map[string]any); ok {
			delete(sc, "privileged")
		}
	}
	if err := unstructured.SetNestedSlice(obj.Object, containers, "spec", "template", "spec", "containers"); err != nil {
		t.Fatal(err)
	}
}
