package integration

import (
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/test/integration/framework"
)

// TestDriverManifestsAreAccepted creates every object of manifests/driver in a
// real API server (namespace first) and decodes every GpuConfig they carry
// with the driver's own strict decoder.
func TestDriverManifestsAreAccepted(t *testing.T) {
	cp := framework.StartControlPlane(t)
	cp.Create(t, framework.Namespace("ml"))
	configs := 0
	files := []string{"namespace.yaml", "rbac.yaml", "deviceclass.yaml", "daemonset.yaml", "claimtemplates-example.yaml"}
	for i, f := range files {
		files[i] = filepath.Join("manifests", "driver", f)
	}
	for _, m := range framework.Manifests(t, files...) {
		obj := m.Object
		if obj.GetKind() == "DaemonSet" {
			// The test API server runs without --allow-privileged; the
			// real cluster needs it for nvidia-smi compute-policy.
			withoutPrivileged(t, obj)
		}
		created, err := cp.CreateManifest(t, obj)
		if err != nil {
			t.Errorf("%s: creating %s %s: %v", m.File, obj.GetKind(), obj.GetName(), err)
			continue
		}
		configs += decodeGpuConfigs(t, m.File+" "+created.GetName(), created.Object)
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
			if _, err := gpuv1.Decode(raw); err != nil {
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
