package install

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/rota-dev/rota/pkg/sandbox/apply"
	"github.com/rota-dev/rota/test/integration/framework"
)

// render builds a kustomization under manifests/ as `kubectl kustomize`
// does, with its default load restrictor: no kustomization may read a file
// outside its own directory.
func render(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	opts := krusty.MakeDefaultOptions()
	if opts.LoadRestrictions != types.LoadRestrictionsRootOnly {
		t.Fatalf("kustomize's default load restrictor is %s, want %s", opts.LoadRestrictions, types.LoadRestrictionsRootOnly)
	}
	k := krusty.MakeKustomizer(opts)
	res, err := k.Run(filesys.MakeFsOnDisk(), filepath.Join(framework.RepoRoot(t), "manifests", dir))
	if err != nil {
		t.Fatalf("kustomize build manifests/%s: %v", dir, err)
	}
	out, err := res.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	objs, err := apply.DecodeObjects(out)
	if err != nil {
		t.Fatalf("manifests/%s: %v", dir, err)
	}
	return objs
}

func find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

// TestInstallManifestsDryRun renders the whole install (manifests/), the
// base and the canary overlay, and has a real API server accept every
// object (server-side apply, dry run; namespaces are created for real so
// namespaced objects can be checked).
func TestInstallManifestsDryRun(t *testing.T) {
	cp := framework.StartControlPlane(t)
	applier, err := apply.NewApplier(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	shippedConfig, err := os.ReadFile(filepath.Join(framework.RepoRoot(t), "manifests", "scheduler", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	rendered := map[string][]string{}
	for _, dir := range []string{"", "base", "overlays/canary"} {
		objs := render(t, dir)
		for _, o := range objs {
			rendered[dir] = append(rendered[dir], o.GetKind()+" "+o.GetNamespace()+"/"+o.GetName())
			if o.GetKind() == "ResourceClaimTemplate" {
				t.Errorf("manifests/%s: holds the example claim template %s", dir, o.GetName())
			}
		}
		for _, want := range []struct{ kind, name string }{
			{"CustomResourceDefinition", "deployschedules.rota.dev"},
			{"CustomResourceDefinition", "gpureservations.rota.dev"},
			{"CustomResourceDefinition", "gpuquotas.rota.dev"},
			{"Deployment", "rota-scheduler"},
			{"Deployment", "rota-schedule-controller"},
			{"DaemonSet", "rota-dra-kubelet-plugin"},
			{"DeviceClass", "gpu.rota.dev"},
			{"ValidatingAdmissionPolicy", "rota-reserved-gpu-tolerations"},
			// docs/security.md: pods routed to Rota, every GPU class
			// counted, the reservation controller's writes narrowed, and
			// the cluster admin's parameter object they read.
			{"MutatingAdmissionPolicy", "rota-gpu-pods-scheduler"},
			{"MutatingAdmissionPolicyBinding", "rota-gpu-pods-scheduler"},
			{"ValidatingAdmissionPolicy", "rota-gpu-pods"},
			{"ValidatingAdmissionPolicy", "rota-gpu-classes-counted"},
			{"ValidatingAdmissionPolicy", "rota-reservation-controller-writes"},
			{"ConfigMap", "rota-admission"},
		} {
			found := false
			for _, o := range objs {
				found = found || (o.GetKind() == want.kind && (want.name == "" || o.GetName() == want.name))
			}
			if !found {
				t.Errorf("manifests/%s: no %s %s", dir, want.kind, want.name)
			}
		}
		// The scheduler mounts the generated ConfigMap under its hashed name.
		sched := find(objs, "Deployment", "rota-scheduler")
		vols, _, _ := unstructured.NestedSlice(sched.Object, "spec", "template", "spec", "volumes")
		cmName := ""
		if len(vols) == 1 {
			cmName, _, _ = unstructured.NestedString(vols[0].(map[string]any), "configMap", "name")
		}
		if cm := find(objs, "ConfigMap", cmName); cm == nil || !strings.HasPrefix(cmName, "rota-scheduler-config-") {
			t.Errorf("manifests/%s: the scheduler mounts ConfigMap %q, which is not the generated one", dir, cmName)
		} else if data, _, _ := unstructured.NestedString(cm.Object, "data", "config.yaml"); data != string(shippedConfig) {
			t.Errorf("manifests/%s: the generated scheduler config is not manifests/scheduler/config.yaml", dir)
		}
		for _, o := range objs {
			if o.GetKind() == "Namespace" {
				if err := applier.Apply(ctx, o, false); err != nil {
					t.Fatal(err)
				}
			}
		}
		for _, o := range objs {
			if err := applier.Apply(ctx, o, true); err != nil {
				t.Errorf("manifests/%s: %v", dir, err)
			}
		}
	}
	// manifests/ is the base, object for object.
	if root, base := strings.Join(rendered[""], "\n"), strings.Join(rendered["base"], "\n"); root != base {
		t.Errorf("manifests/ renders\n%s\nmanifests/base renders\n%s", root, base)
	}
	ds := find(render(t, "overlays/canary"), "DaemonSet", "rota-dra-kubelet-plugin")
	if sel, _, _ := unstructured.NestedStringMap(ds.Object, "spec", "template", "spec", "nodeSelector"); sel["rota.dev/gpu-stack"] != "dra" || sel["nvidia.com/gpu.present"] != "true" {
		t.Errorf("canary overlay: driver nodeSelector %v, want the canary label added", sel)
	}
}
