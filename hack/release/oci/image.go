package oci

import (
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
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
	// Glibc says the binary is linked against the C library, which is then
	// copied from the build machine with the libraries ldd names and the
	// ones in GlibcExtra. Without it the binary must be static.
	Glibc bool
	// GlibcExtra are further libraries of the C library's directory to
	// ship, for programs mounted in at run time (nvidia-smi).
	GlibcExtra []string
}

// Meta is what the labels say of the build.
type Meta struct {
	Version, Revision, Source, Licenses string
	Created                             time.Time
}

// Host is the build machine the base layer is taken from.
type Host struct {
	// Root is its "/" (a directory in tests).
	Root string
	// Ldd lists a binary's shared objects as ldd prints them.
	Ldd func(binary string) ([]byte, error)
	// Package names the Debian package of a file, for the SBOM; nil
	// records every file by its hash.
	Package DebianPackage
}

// BuildMachine is the machine this runs on.
func BuildMachine() Host {
	return Host{Root: "/", Ldd: func(binary string) ([]byte, error) {
		out, err := exec.Command("ldd", binary).CombinedOutput()
		if err != nil {
			return nil, fmt.Errorf("ldd %s: %w: %s", binary, err, out)
		}
		return out, nil
	}, Package: dpkgOwner}
}

const (
	passwd = "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	group  = "root:x:0:\nnonroot:x:65532:\n"
	// caBundle is where Debian, Ubuntu and Alpine keep the CA bundle, and
	// the first place Go's crypto/x509 looks on Linux.
	caBundle = "/etc/ssl/certs/ca-certificates.crt"
	// glibcCopyright is the C library's licence text on Debian.
	glibcCopyright = "/usr/share/doc/libc6/copyright"
)

// BaseLayer is what every image has besides its binary: /etc/passwd and
// /etc/group with root and nonroot, their home directories, /tmp, the
// build machine's CA bundle when it has one and, for a glibc binary, the
// C library.
func BaseLayer(s Spec, h Host) (*Tree, error) {
	t := NewTree()
	for _, err := range []error{
		t.File("/etc/passwd", 0o644, []byte(passwd)),
		t.File("/etc/group", 0o644, []byte(group)),
		t.Dir("/root", 0o700, 0, 0),
		t.Dir("/home/nonroot", 0o700, NonRoot, NonRoot),
		t.Dir("/tmp", 0o1777, 0, 0),
	} {
		if err != nil {
			return nil, err
		}
	}
	if _, err := os.Stat(filepath.Join(h.Root, caBundle)); err == nil {
		if err := t.CopyHostPath(h.Root, caBundle); err != nil {
			return nil, err
		}
	}
	if !s.Glibc {
		return t, nil
	}
	out, err := h.Ldd(s.Binary)
	if err != nil {
		return nil, err
	}
	libs, err := ParseLdd(out)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.Binary, err)
	}
	libcDir := ""
	for _, l := range libs {
		if path.Base(l) == "libc.so.6" {
			libcDir = path.Dir(l)
		}
		if err := t.CopyHostPath(h.Root, l); err != nil {
			return nil, err
		}
	}
	if libcDir == "" && len(s.GlibcExtra) > 0 {
		return nil, fmt.Errorf("%s: ldd names no libc.so.6, so there is no directory to take %v from", s.Binary, s.GlibcExtra)
	}
	for _, l := range s.GlibcExtra {
		if err := t.CopyHostPath(h.Root, path.Join(libcDir, l)); err != nil {
			return nil, err
		}
	}
	// The NVIDIA container toolkit adds a file under /etc/ld.so.conf.d and
	// rebuilds the cache when it mounts the driver's libraries.
	if err := t.File("/etc/ld.so.conf", 0o644, []byte("include /etc/ld.so.conf.d/*.conf\n")); err != nil {
		return nil, err
	}
	if err := t.Dir("/etc/ld.so.conf.d", 0o755, 0, 0); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(h.Root, glibcCopyright)); err == nil {
		if err := t.CopyHostPath(h.Root, glibcCopyright); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// checkLinkage refuses a dynamically linked binary for an image without
// the C library, where it would fail with a bare "no such file or
// directory" at start.
func checkLinkage(s Spec) error {
	f, err := elf.Open(s.Binary)
	if err != nil {
		return fmt.Errorf("%s: %w", s.Binary, err)
	}
	defer func() { _ = f.Close() }()
	dynamic := false
	for _, p := range f.Progs {
		dynamic = dynamic || p.Type == elf.PT_INTERP
	}
	if dynamic && !s.Glibc {
		return fmt.Errorf("%s is dynamically linked: build it with CGO_ENABLED=0 for a static image", s.Binary)
	}
	if !dynamic && s.Glibc {
		return fmt.Errorf("%s is static, but its image is meant to ship the C library", s.Binary)
	}
	return nil
}

// Build assembles the image of s, named ref, and its bill of materials.
func Build(s Spec, m Meta, h Host, ref string) (v1.Image, *cdx.BOM, error) {
	if s.Name == "" || s.Binary == "" {
		return nil, nil, errors.New("an image needs a name and a binary")
	}
	if err := checkLinkage(s); err != nil {
		return nil, nil, err
	}
	base, err := BaseLayer(s, h)
	if err != nil {
		return nil, nil, err
	}
	img, err := build(s, m, base)
	if err != nil {
		return nil, nil, err
	}
	bom, err := SBOM(s, m, h, base, img, ref)
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
