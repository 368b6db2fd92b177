package framework

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
)

// Manifest is one object of a shipped YAML file.
type Manifest struct {
	File   string // base name of the file it came from
	Object *unstructured.Unstructured
}

// Manifests decodes every object of the YAML files, given relative to the
// repository root, in file order. kustomization.yaml files are kustomize's,
// not objects, and are skipped.
func Manifests(tb testing.TB, files ...string) []Manifest {
	tb.Helper()
	var out []Manifest
	for _, rel := range files {
		if filepath.Base(rel) == "kustomization.yaml" {
			continue
		}
		data, err := os.ReadFile(filepath.Join(RepoRoot(tb), rel))
		if err != nil {
			tb.Fatal(err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			obj := &unstructured.Unstructured{}
			if err := dec.Decode(&obj.Object); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				tb.Fatalf("%s: %v", rel, err)
			}
			if len(obj.Object) != 0 {
				out = append(out, Manifest{File: filepath.Base(rel), Object: obj})
			}
		}
	}
	return out
}

// ManifestDir lists the YAML files of a directory of the repository,
// relative to its root, failing when there are none.
func ManifestDir(tb testing.TB, dir string) []string {
	tb.Helper()
	files, err := filepath.Glob(filepath.Join(RepoRoot(tb), dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		tb.Fatalf("no manifests in %s: %v", dir, err)
	}
	for i, f := range files {
		files[i] = filepath.Join(dir, filepath.Base(f))
	}
	return files
}

// CreateManifest creates obj through the dynamic client, finding its
// resource by discovery, with strict field validation.
func (cp *ControlPlane) CreateManifest(tb testing.TB, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	tb.Helper()
	groups, err := restmapper.GetAPIGroupResources(cp.Client.Discovery())
	if err != nil {
		tb.Fatal(err)
	}
	gvk := obj.GroupVersionKind()
	m, err := restmapper.NewDiscoveryRESTMapper(groups).RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		tb.Fatalf("%s: %v", gvk, err)
	}
	opts := metav1.CreateOptions{FieldValidation: "Strict"}
	if ns := obj.GetNamespace(); ns != "" {
		return cp.Dynamic.Resource(m.Resource).Namespace(ns).Create(tb.Context(), obj, opts)
	}
	return cp.Dynamic.Resource(m.Resource).Create(tb.Context(), obj, opts)
}
