package integration

import (
	"os"
	"path/filepath"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/rota-dev/rota/test/integration/framework"
)

// TestInstalledCRDsAreInDiscovery maps every Rota kind with a REST mapper
// built right after the CRDs are installed, as the sandbox's applier and
// kubectl do: install must not return while discovery still lacks a kind
// (an "Established" CRD is in discovery only a moment later).
func TestInstalledCRDsAreInDiscovery(t *testing.T) {
	cp := framework.StartControlPlane(t)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(cp.Extensions.Discovery()))
	files, err := filepath.Glob(filepath.Join(framework.RepoRoot(t), "manifests", "crds", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	mapped := 0
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(data, &crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, v := range crd.Spec.Versions {
			m, err := mapper.RESTMapping(schema.GroupKind{Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind}, v.Name)
			if err != nil {
				t.Errorf("%s %s: %v", crd.Spec.Names.Kind, v.Name, err)
				continue
			}
			if m.Resource.Resource != crd.Spec.Names.Plural {
				t.Errorf("%s maps to %q, want %q", crd.Spec.Names.Kind, m.Resource.Resource, crd.Spec.Names.Plural)
			}
			mapped++
		}
	}
	if mapped == 0 {
		t.Fatal("no CRD versions found in manifests/crds")
	}
}
