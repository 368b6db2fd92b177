package oci

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"time"

	cdx "github.com/CycloneDX/cyclonedx-go"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// NonRoot is the user and group id of the unprivileged user, "nonroot" in
// /etc/passwd (the number distroless images use).
const NonRoot = 65532

// The labels every image carries (OCI image-spec annotations, set as
// config labels).
const (
	LabelTitle       = "org.opencontainers.image.title"
	LabelDescription = "org.opencontainers.image.description"
	LabelVersion     = "org.opencontainers.image.version"
	LabelRevision    = "org.opencontainers.image.revision"
	LabelSource      = "org.opencontainers.image.source"
	LabelCreated     = "org.opencontainers.image.created"
	LabelLicenses    = "org.opencontainers.image.licenses"
)

// Spec is one image: a single binary and what it needs to run.
type Spec struct {
	// Name is the image's and the binary's name; the binary is /<Name>,
	// the entrypoint.
	Name        string
	Description string
	// Binary is the file to ship, on the build machine.
	Binary string
	// Root runs the entrypoint as root (uid 0); otherwise as NonRoot.
	Root bool
	// Glibc says the binary is linked against the C library: the image then
	// has the pinned libc6's loader, the libraries the binary names
	// (DT_NEEDED) and the ones in GlibcExtra. Without it the binary must be
	// static.
	Glibc bool
	// GlibcExtra are further libraries of libc6 to ship, by base name, for
	// programs mounted in at run time (nvidia-smi).
	GlibcExtra []string
}

// Meta is what the labels say of the build.
type Meta struct {
	Version, Revision, Source, Licenses string
	Created                             time.Time
}

// Build assembles the image of s, named ref, on base, and its bill of
// materials.
func Build(s Spec, m Meta, b Base, ref string) (v1.Image, *cdx.BOM, error) {
	if s.Name == "" || s.Binary == "" {
		return nil, nil, errors.New("an image needs a name and a binary")
	}
	if err := checkLinkage(s); err != nil {
		return nil, nil, err
	}
	base, pins, err := BaseLayer(s, b)
	if err != nil {
		return nil, nil, err
	}
	img, err := build(s, m, base)
	if err != nil {
		return nil, nil, err
	}
	bom, err := SBOM(s, m, pins, img, ref)
	if err != nil {
		return nil, nil, err
	}
	return img, bom, nil
}

func build(s Spec, m Meta, base *Tree) (v1.Image, error) {
	bin, err := os.ReadFile(s.Binary)
	if err != nil {
		return nil, err
	}
	app := NewTree()
	if err := app.File("/"+s.Name, 0o755, bin); err != nil {
		return nil, err
	}
	mtime := m.Created.UTC().Truncate(time.Second)
	var layers []v1.Layer
	for _, t := range []*Tree{base, app} {
		l, err := t.Layer(mtime)
		if err != nil {
			return nil, err
		}
		layers = append(layers, l)
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	if img, err = mutate.AppendLayers(img, layers...); err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Created = v1.Time{Time: mtime}
	user := fmt.Sprintf("%d:%d", NonRoot, NonRoot)
	if s.Root {
		user = "0:0"
	}
	cf.Config = v1.Config{
		Entrypoint: []string{"/" + s.Name},
		User:       user,
		WorkingDir: "/",
		Env:        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
		Labels: map[string]string{
			LabelTitle:       s.Name,
			LabelDescription: s.Description,
			LabelVersion:     m.Version,
			LabelRevision:    m.Revision,
			LabelSource:      m.Source,
			LabelCreated:     mtime.Format(time.RFC3339),
			LabelLicenses:    m.Licenses,
		},
	}
	return mutate.ConfigFile(img, cf)
}
