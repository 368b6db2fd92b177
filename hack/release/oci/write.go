package oci

import (
	"context"
	"fmt"
	"os"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// refAnnotation names an image of an OCI layout by its tag (what
// `skopeo copy oci:DIR:TAG` looks for); containerd reads the full
// reference from its own annotation.
const (
	refAnnotation           = "org.opencontainers.image.ref.name"
	containerdRefAnnotation = "io.containerd.image.name"
)

// WriteLayout writes img as the only image of a fresh OCI layout at dir.
func WriteLayout(dir string, img v1.Image, ref name.Tag) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("OCI layout %s: %w", dir, err)
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{
		refAnnotation:           ref.TagStr(),
		containerdRefAnnotation: ref.Name(),
	})); err != nil {
		return fmt.Errorf("OCI layout %s: %w", dir, err)
	}
	return nil
}

// ReadLayout returns the image of a layout WriteLayout wrote and its
// reference.
func ReadLayout(dir string) (v1.Image, name.Tag, error) {
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, name.Tag{}, fmt.Errorf("OCI layout %s: %w", dir, err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, name.Tag{}, err
	}
	if len(m.Manifests) != 1 {
		return nil, name.Tag{}, fmt.Errorf("OCI layout %s holds %d images, want 1", dir, len(m.Manifests))
	}
	d := m.Manifests[0]
	ref, err := name.NewTag(d.Annotations[containerdRefAnnotation])
	if err != nil {
		return nil, name.Tag{}, fmt.Errorf("OCI layout %s: annotation %s: %w", dir, containerdRefAnnotation, err)
	}
	img, err := idx.Image(d.Digest)
	if err != nil {
		return nil, name.Tag{}, err
	}
	return img, ref, nil
}

// WriteTarball writes img as a docker-archive (`docker save` format),
// which `docker load`, `ctr images import`, `skopeo copy
// docker-archive:FILE` and `crane push FILE` read.
func WriteTarball(file string, img v1.Image, ref name.Tag) error {
	if err := tarball.WriteToFile(file, ref, img); err != nil {
		return fmt.Errorf("image tarball %s: %w", file, err)
	}
	return nil
}

// Push uploads img as ref, with the credentials of the Docker config
// (~/.docker/config.json, or $DOCKER_CONFIG) and its helpers.
func Push(ctx context.Context, img v1.Image, ref name.Reference) error {
	if err := remote.Write(ref, img, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return fmt.Errorf("pushing %s: %w", ref, err)
	}
	return nil
}
