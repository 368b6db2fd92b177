package install

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/rota-dev/rota/hack/release/manifests"
	"github.com/rota-dev/rota/pkg/sandbox/apply"
	"github.com/rota-dev/rota/test/integration/framework"
)

// images returns "<kind>/<name> <container>: <image>" for every container
// of every pod template among objs.
func images(objs []*unstructured.Unstructured) map[string]string {
	out := map[string]string{}
	for _, o := range objs {
		// A CronJob's pods are in its job template.
		pod := []string{"spec", "template", "spec"}
		if o.GetKind() == "CronJob" {
			pod = []string{"spec", "jobTemplate", "spec", "template", "spec"}
		}
		for _, field := range []string{"containers", "initContainers"} {
			cs, _, _ := unstructured.NestedSlice(o.Object, append(pod, field)...)
			for _, c := range cs {
				m, _ := c.(map[string]any)
				out[fmt.Sprintf("%s/%s %v", o.GetKind(), o.GetName(), m["name"])] = fmt.Sprint(m["image"])
			}
		}
	}
	return out
}

// TestShippedManifestsPinOneVersion: the kustomize install names every
// Rota image with the one tag of manifests/base's images: block, never
// "latest" nor none.
func TestShippedManifestsPinOneVersion(t *testing.T) {
	for _, dir := range []string{"", "overlays/canary"} {
		imgs := images(render(t, dir))
		if distinct := slices.Compact(slices.Sorted(maps.Values(imgs))); len(distinct) != len(manifests.Images) {
			t.Errorf("manifests/%s: images %v, want one per image %v", dir, distinct, manifests.Images)
		}
		tags := map[string]bool{}
		for where, img := range imgs {
			repo, tag, ok := strings.Cut(strings.TrimPrefix(img, manifests.DefaultRegistry+"/"), ":")
			if !ok || tag == "latest" || !strings.HasPrefix(img, manifests.DefaultRegistry+"/") {
				t.Errorf("manifests/%s: %s runs %q, want %s/<name>:<version>", dir, where, img, manifests.DefaultRegistry)
			}
			if !strings.Contains(where, repo) {
				t.Errorf("manifests/%s: %s runs image %q, not its own", dir, where, img)
			}
			tags[tag] = true
		}
		if len(tags) != 1 {
			t.Errorf("manifests/%s: images carry tags %v, want one version", dir, tags)
		}
	}
}

// TestReleaseManifestsDryRun renders bin/release/rota.yaml as `make
// release-manifests VERSION=... REGISTRY=...` does and has a real API
// server accept every object; every image is the versioned one from the
// given registry, pinned to its digest, and the objects are those of the
// kustomize install.
func TestReleaseManifestsDryRun(t *testing.T) {
	const version, registry = "v9.8.7-rc.1", "registry.example.com/team/rota"
	dir := filepath.Join(framework.RepoRoot(t), "manifests")
	digests := map[string]string{}
	for i, name := range manifests.Images {
		digests[name] = "sha256:" + strings.Repeat(fmt.Sprint(i+1), 64)
	}
	y, err := manifests.Render(dir, version, registry, digests)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := apply.DecodeObjects(y)
	if err != nil {
		t.Fatal(err)
	}
	var got, want []string
	for _, img := range images(objs) {
		got = append(got, img)
	}
	for _, name := range manifests.Images {
		want = append(want, registry+"/"+name+":"+version+"@"+digests[name])
	}
	sort.Strings(got)
	got = slices.Compact(got)
	sort.Strings(want)
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("rota.yaml runs images %v, want %v", got, want)
	}
	if strings.Contains(string(y), "ghcr.io/rota-dev") || strings.Contains(string(y), ":latest") {
		t.Errorf("rota.yaml still names the default registry or a latest tag")
	}
	ids := func(objs []*unstructured.Unstructured) string {
		var s []string
		for _, o := range objs {
			s = append(s, o.GetKind()+" "+o.GetNamespace()+"/"+o.GetName())
		}
		return strings.Join(s, "\n")
	}
	if a, b := ids(objs), ids(render(t, "")); a != b {
		t.Errorf("rota.yaml holds\n%s\nmanifests/ holds\n%s", a, b)
	}

	cp := framework.StartControlPlane(t)
	applier, err := apply.NewApplier(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, o := range objs {
		if o.GetKind() == "Namespace" {
			if err := applier.Apply(ctx, o, false); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, o := range objs {
		if err := applier.Apply(ctx, o, true); err != nil {
			t.Errorf("rota.yaml: %v", err)
		}
	}
}
