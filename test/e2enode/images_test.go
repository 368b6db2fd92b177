package e2enode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/rota-dev/rota/hack/release/oci"
	"github.com/rota-dev/rota/test/e2enode/node"
)

// workloadImage is the GPU pods' image: test/e2enode/workload, which
// prints its NVIDIA_/ROTA_ environment and device nodes.
const workloadImage = "localhost/rota-e2e/workload:v1"

// rotaImages are the images of make images the chart runs, by chart key.
var rotaImages = map[string]string{
	"driver":             "dra-kubelet-plugin",
	"scheduler":          "scheduler",
	"scheduleController": "schedule-controller",
}

// importImages loads into the node's containerd what a registry would
// serve: the pod sandbox image and the workload image, both built here
// from the static workload binary, and Rota's images from make images.
// It records Rota's image references for the install.
func (c *e2eCluster) importImages(ctx context.Context) error {
	bin := filepath.Join(c.binDir, "e2e-workload")
	dir := filepath.Join(c.dir, "images")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	meta := oci.Meta{Version: "e2e", Created: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	// The base packages make images pinned and downloaded.
	base, err := oci.LoadBase(filepath.Join("..", "..", oci.LockFile), filepath.Join(c.binDir, "debs"), runtime.GOARCH)
	if err != nil {
		return err
	}
	for _, img := range []struct {
		spec oci.Spec
		ref  string
	}{
		{oci.Spec{Name: "pause", Description: "pod sandbox", Binary: bin, Root: true}, node.PauseImage},
		{oci.Spec{Name: "workload", Description: "prints what a GPU container is given", Binary: bin}, workloadImage},
	} {
		built, _, err := oci.Build(img.spec, meta, base, img.ref)
		if err != nil {
			return fmt.Errorf("image %s: %w", img.ref, err)
		}
		tag, err := name.NewTag(img.ref)
		if err != nil {
			return err
		}
		file := filepath.Join(dir, img.spec.Name+".tar")
		if err := oci.WriteTarball(file, built, tag); err != nil {
			return err
		}
		if err := c.node.ImportImage(ctx, file); err != nil {
			return err
		}
	}
	c.images = map[string]name.Tag{}
	for key, image := range rotaImages {
		layout := filepath.Join(c.binDir, "images", image)
		_, ref, err := oci.ReadLayout(layout)
		if err != nil {
			return fmt.Errorf("make images' %s: %w", image, err)
		}
		if err := c.node.ImportImage(ctx, layout+".tar"); err != nil {
			return err
		}
		c.images[key] = ref
	}
	return nil
}
