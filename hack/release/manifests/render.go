// Package manifests renders Rota's kustomize install (manifests/) for one
// release: every image at one registry and one version, the way
// `make release-manifests` writes bin/release/rota.yaml.
package manifests

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// DefaultRegistry is where the shipped manifests pull Rota's images from.
const DefaultRegistry = "ghcr.io/rota-dev"

// Images are Rota's container images, one per binary that runs in the
// cluster; each is <registry>/<name>.
var Images = []string{"scheduler", "schedule-controller", "dra-kubelet-plugin"}

// tagPattern is the OCI distribution spec's tag grammar.
var tagPattern = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)

// ValidateVersion refuses a version that is not an image tag, and
// "latest", which names no release.
func ValidateVersion(version string) error {
	if !tagPattern.MatchString(version) {
		return fmt.Errorf("version %q is not an image tag (letters, digits, '_', '.', '-'; at most 128)", version)
	}
	if version == "latest" {
		return fmt.Errorf("version %q names no release: give the version to install, e.g. v0.1.0", version)
	}
	return nil
}

// digestPattern is an OCI image digest, as the release pins images.
var digestPattern = regexp.MustCompile(`^sha256:[a-f0-9]{64}$`)

// Render builds the kustomization at manifestsDir (the repository's
// manifests/) with every Rota image set to registry/<name>:version, by an
// overlay with a kustomize images: block on top of it, and returns the
// YAML stream. digests, when not nil, must hold the digest of every image
// (by name); each image is then pinned to it, <registry>/<name>@<digest>.
func Render(manifestsDir, version, registry string, digests map[string]string) ([]byte, error) {
	if err := ValidateVersion(version); err != nil {
		return nil, err
	}
	registry = strings.TrimSuffix(registry, "/")
	if _, err := name.NewRepository(registry+"/"+Images[0], name.StrictValidation); registry == "" || err != nil {
		return nil, fmt.Errorf("registry %q is not a registry host and path, e.g. ghcr.io/rota-dev", registry)
	}
	mem := filesys.MakeFsInMemory()
	err := filepath.WalkDir(manifestsDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(manifestsDir, p)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return mem.WriteFile(path.Join("/manifests", filepath.ToSlash(rel)), data)
	})
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", manifestsDir, err)
	}
	var k strings.Builder
	k.WriteString("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- ../manifests\nimages:\n")
	for _, img := range Images {
		fmt.Fprintf(&k, "- name: %s/%s\n  newName: %s/%s\n  newTag: %q\n", DefaultRegistry, img, registry, img, version)
		if digests == nil {
			continue
		}
		d := digests[img]
		if !digestPattern.MatchString(d) {
			return nil, fmt.Errorf("image %s: digest %q is not sha256:<64 hex digits>", img, d)
		}
		fmt.Fprintf(&k, "  digest: %s\n", d)
	}
	if err := mem.WriteFile("/release/kustomization.yaml", []byte(k.String())); err != nil {
		return nil, err
	}
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(mem, "/release")
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s for %s: %w", manifestsDir, version, err)
	}
	return res.AsYaml()
}
