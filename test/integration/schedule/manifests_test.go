package schedule

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/restmapper"

	"github.com/rota-dev/rota/test/integration/framework"
)

// TestManifestsAreAccepted creates every object of manifests/schedule-controller
// in a real API server with strict field validation.
func TestManifestsAreAccepted(t *testing.T) {
	cp := framework.StartControlPlane(t)
	cp.Create(t, framework.Namespace("rota-system"))
	groups, err := restmapper.GetAPIGroupResources(cp.Client.Discovery())
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDiscoveryRESTMapper(groups)
	dir := filepath.Join(framework.RepoRoot(t), "manifests", "schedule-controller")
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in %s: %v", dir, err)
	}
	created := 0
	for _, file := range files {
		if filepath.Base(file) == "kustomization.yaml" {
			continue // kustomize's, not an object
		}
		data, err := os.ReadFile(file)
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
			m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			if err != nil {
				t.Fatalf("%s: %s: %v", file, gvk, err)
			}
			ri := cp.Dynamic.Resource(m.Resource)
			if obj.GetNamespace() != "" {
				_, err = ri.Namespace(obj.GetNamespace()).Create(t.Context(), &obj, metav1.CreateOptions{FieldValidation: "Strict"})
			} else {
				_, err = ri.Create(t.Context(), &obj, metav1.CreateOptions{FieldValidation: "Strict"})
			}
			if err != nil {
				t.Errorf("%s: creating %s %s: %v", filepath.Base(file), gvk.Kind, obj.GetName(), err)
				continue
			}
			created++
		}
	}
	if created != 7 {
		t.Errorf("created %d objects, want 7 (ServiceAccount, ClusterRole(+Binding), Role(+Binding), ConfigMap, Deployment)", created)
	}
}
