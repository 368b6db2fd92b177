// Command release builds what a Rota release ships, with no Docker daemon:
//
//	release images    --bin-dir DIR --out DIR --version V ...   one OCI image per binary (make images)
//	release push      --dir DIR --registry REG                  push them (make push)
//	release manifests --version V --registry REG --out FILE     the install as one YAML file (make release-manifests)
//	release lock      [NAME[:ARCH][=VERSION] ...]               pin the base layers' Debian packages (make base-lock)
//
// Images are written as an OCI layout (DIR/<name>/) and a docker-archive
// tarball (DIR/<name>.tar). hack/release/oci assembles them; docs/install.md
// says how to install what this writes.
//
// The images' base layer is made of Debian packages pinned in
// base-packages.lock (libc6 for the cgo binaries, ca-certificates for the
// CA bundle of all three): `release images` downloads exactly those .debs
// with apt-get into a cache (bin/debs), checks each one's SHA-256 against
// the lock and takes the files from the packages, not from the build
// machine's /lib or /etc, so that the same commit and the same lock give the
// same images on any machine. `release lock` moves the pins to apt's
// candidate versions (or to the versions named).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/rota-dev/rota/hack/release/manifests"
	"github.com/rota-dev/rota/hack/release/oci"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: release images|push|manifests|lock [flags]")
	}
	switch args[0] {
	case "images":
		return runImages(args[1:], out)
	case "push":
		return runPush(ctx, args[1:], out)
	case "manifests":
		return runManifests(args[1:], out)
	case "lock":
		return runLock(args[1:], out)
	default:
		return fmt.Errorf("unknown command %q: use images, push, manifests or lock", args[0])
	}
}

// specs are the images. The scheduler is static and unprivileged. The
// schedule controller is unprivileged but linked against the C library:
// its `forecast` builds node profiles on go-nvml's mocks, and go-nvml needs
// cgo. The DRA driver is linked against the C library too (go-nvml loads
// NVML with dlopen) and runs as root: it writes the kubelet's plugin
// directories and the CDI directory on the host, and nvidia-smi changes
// time slices.
func specs(binDir string) []oci.Spec {
	return []oci.Spec{
		{Name: "scheduler", Binary: filepath.Join(binDir, "scheduler"),
			Description: "kube-scheduler with Rota's plugins"},
		{Name: "schedule-controller", Binary: filepath.Join(binDir, "schedule-controller"),
			Description: "Rota's DeploySchedule and GPUReservation controllers", Glibc: true},
		{Name: "dra-kubelet-plugin", Binary: filepath.Join(binDir, "dra-kubelet-plugin"),
			Description: "Rota's DRA kubelet plugin on NVML", Root: true, Glibc: true,
			// nvidia-smi, which the NVIDIA container toolkit mounts in,
			// links these besides libc.
			GlibcExtra: []string{"libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1"}},
	}
}

func runImages(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("images", flag.ContinueOnError)
	binDir := fs.String("bin-dir", "bin", "directory holding the binaries (scheduler static, schedule-controller and dra-kubelet-plugin with cgo)")
	outDir := fs.String("out", "bin/images", "where to write <name>/ (OCI layout), <name>.tar (docker-archive) and <name>.cdx.json (CycloneDX SBOM)")
	registry := fs.String("registry", manifests.DefaultRegistry, "registry and path the images are named under")
	version := fs.String("version", "", "the release version: the tag, and label org.opencontainers.image.version")
	revision := fs.String("revision", "unknown", "the git commit (label org.opencontainers.image.revision)")
	source := fs.String("source", "https://github.com/rota-dev/rota", "label org.opencontainers.image.source")
	licenses := fs.String("licenses", "NOASSERTION", "SPDX expression for label org.opencontainers.image.licenses")
	created := fs.String("created", "", "RFC 3339 build time (label org.opencontainers.image.created; file times); now when empty")
	lock := fs.String("lock", oci.LockFile, "the base layers' pinned Debian packages")
	debCache := fs.String("deb-cache", "bin/debs", "where the pinned .debs are downloaded to and reused from")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := manifests.ValidateVersion(*version); err != nil {
		return fmt.Errorf("--version: %w", err)
	}
	meta := oci.Meta{Version: *version, Revision: *revision, Source: *source, Licenses: *licenses, Created: time.Now()}
	if *created != "" {
		t, err := time.Parse(time.RFC3339, *created)
		if err != nil {
			return fmt.Errorf("--created: %w", err)
		}
		meta.Created = t
	}
	if err := os.MkdirAll(*outDir, 0o755); err != nil {
		return err
	}
	// The binaries are built for this machine's architecture; so is the
	// C library that runs them.
	base, err := oci.LoadBase(*lock, *debCache, runtime.GOARCH)
	if err != nil {
		return fmt.Errorf("base layer: %w", err)
	}
	for _, s := range specs(*binDir) {
		ref, err := name.NewTag(fmt.Sprintf("%s/%s:%s", *registry, s.Name, *version), name.StrictValidation)
		if err != nil {
			return fmt.Errorf("--registry: %w", err)
		}
		img, bom, err := oci.Build(s, meta, base, ref.Name())
		if err != nil {
			return fmt.Errorf("image %s: %w", s.Name, err)
		}
		if err := oci.WriteSBOM(filepath.Join(*outDir, s.Name+".cdx.json"), bom); err != nil {
			return err
		}
		if err := oci.WriteLayout(filepath.Join(*outDir, s.Name), img, ref); err != nil {
			return err
		}
		if err := oci.WriteTarball(filepath.Join(*outDir, s.Name+".tar"), img, ref); err != nil {
			return err
		}
		digest, err := img.Digest()
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "%s@%s\n", ref, digest)
	}
	return nil
}

func runPush(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("push", flag.ContinueOnError)
	dir := fs.String("dir", "bin/images", "where `release images` wrote the images")
	registry := fs.String("registry", "", "registry and path to push to, e.g. registry.example.com/rota (required)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *registry == "" {
		return errors.New("--registry is required (make push REGISTRY=registry.example.com/rota)")
	}
	for _, s := range specs("") {
		img, built, err := oci.ReadLayout(filepath.Join(*dir, s.Name))
		if err != nil {
			return fmt.Errorf("%w (run make images first)", err)
		}
		ref, err := name.NewTag(fmt.Sprintf("%s/%s:%s", *registry, s.Name, built.TagStr()), name.StrictValidation)
		if err != nil {
			return fmt.Errorf("--registry: %w", err)
		}
		if err := oci.Push(ctx, img, ref); err != nil {
			return err
		}
		digest, err := img.Digest()
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "pushed %s@%s\n", ref, digest)
	}
	return nil
}

func runManifests(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("manifests", flag.ContinueOnError)
	dir := fs.String("manifests", "manifests", "the kustomize install to render")
	version := fs.String("version", "", "the image tag every Rota image gets (required)")
	registry := fs.String("registry", manifests.DefaultRegistry, "registry and path of the images")
	imagesDir := fs.String("images", "bin/images", "where `release images` wrote the images of this version: each is pinned to its digest, and its SBOM is copied next to --out")
	file := fs.String("out", "bin/release/rota.yaml", "file to write")
	if err := fs.Parse(args); err != nil {
		return err
	}
	digests := map[string]string{}
	for _, s := range specs("") {
		img, built, err := oci.ReadLayout(filepath.Join(*imagesDir, s.Name))
		if err != nil {
			return fmt.Errorf("%w (run make images VERSION=%s first)", err, *version)
		}
		if built.TagStr() != *version {
			return fmt.Errorf("%s holds %s built as version %s, not %s: run make images VERSION=%s first", *imagesDir, s.Name, built.TagStr(), *version, *version)
		}
		d, err := img.Digest()
		if err != nil {
			return err
		}
		digests[s.Name] = d.String()
	}
	y, err := manifests.Render(*dir, *version, *registry, digests)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(*file), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(*file, y, 0o644); err != nil {
		return err
	}
	for _, s := range specs("") {
		sbom, err := os.ReadFile(filepath.Join(*imagesDir, s.Name+".cdx.json"))
		if err != nil {
			return fmt.Errorf("%w (run make images VERSION=%s first)", err, *version)
		}
		if err := os.WriteFile(filepath.Join(filepath.Dir(*file), s.Name+".cdx.json"), sbom, 0o644); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "%s: Rota %s, images from %s pinned by digest; SBOMs <image>.cdx.json beside it\n", *file, *version, *registry)
	return nil
}

// runLock rewrites the lock: each package named (NAME[:ARCH][=VERSION]) or,
// with none, each the lock pins now, at the version named or else apt's
// candidate, with the SHA-256 of the .deb apt downloads. The distro is the
// build machine's, whose apt sources serve the packages.
func runLock(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("lock", flag.ContinueOnError)
	lock := fs.String("lock", oci.LockFile, "the lock file to rewrite")
	debCache := fs.String("deb-cache", "bin/debs", "where the .debs are downloaded to")
	if err := fs.Parse(args); err != nil {
		return err
	}
	pkgs := fs.Args()
	if len(pkgs) == 0 {
		pins, err := oci.ReadLock(*lock)
		if err != nil {
			return fmt.Errorf("%w; or name the packages: release lock libc6:%s ca-certificates", err, oci.DebianArch(runtime.GOARCH))
		}
		for _, p := range pins {
			pkgs = append(pkgs, p.Name+":"+p.Arch)
		}
	}
	distro, err := hostDistro("/etc/os-release")
	if err != nil {
		return err
	}
	var pins []oci.Pin
	for _, spec := range pkgs {
		p, err := oci.Resolve(spec, distro, *debCache)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "%s %s %s sha256:%s\n", p.Name, p.Version, p.Arch, p.SHA256)
		pins = append(pins, p)
	}
	b, err := oci.FormatLock(pins)
	if err != nil {
		return err
	}
	return os.WriteFile(*lock, b, 0o644)
}

// hostDistro is ID-VERSION_ID of os-release (debian-12): the release apt's
// packages come from, for their package URLs.
func hostDistro(osRelease string) (string, error) {
	b, err := os.ReadFile(osRelease)
	if err != nil {
		return "", fmt.Errorf("the distro of the packages: %w", err)
	}
	fields := map[string]string{}
	for line := range strings.Lines(string(b)) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok {
			fields[k] = strings.Trim(v, `"`)
		}
	}
	if fields["ID"] == "" || fields["VERSION_ID"] == "" {
		return "", fmt.Errorf("%s names no ID and VERSION_ID", osRelease)
	}
	return fields["ID"] + "-" + fields["VERSION_ID"], nil
}
