package main

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"

	cdx "github.com/CycloneDX/cyclonedx-go"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/rota-dev/rota/hack/release/oci"
)

// binaries returns the directory of the binaries `make build` wrote
// (ROTA_BIN_DIR), or builds them for this test as the Makefile does: the
// scheduler static, the schedule controller and the driver with cgo.
func binaries(t *testing.T) string {
	t.Helper()
	if dir := os.Getenv("ROTA_BIN_DIR"); dir != "" {
		return dir
	}
	dir := t.TempDir()
	for _, b := range []struct {
		name string
		cgo  string
	}{{"scheduler", "0"}, {"schedule-controller", "1"}, {"dra-kubelet-plugin", "1"}} {
		cmd := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(dir, b.name), "./cmd/"+b.name)
		cmd.Dir = "../.."
		cmd.Env = append(os.Environ(), "CGO_ENABLED="+b.cgo)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build ./cmd/%s: %v\n%s", b.name, err, out)
		}
	}
	return dir
}

// extract writes the image's flattened filesystem under dir.
func extract(t *testing.T, img v1.Image, dir string) {
	t.Helper()
	rc := mutate.Extract(img)
	defer func() { _ = rc.Close() }()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.Clean("/"+h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, os.FileMode(h.Mode).Perm())
		case tar.TypeSymlink:
			err = os.Symlink(h.Linkname, p)
		case tar.TypeReg:
			var data []byte
			if data, err = io.ReadAll(tr); err == nil {
				err = os.WriteFile(p, data, os.FileMode(h.Mode).Perm())
			}
		default:
			t.Fatalf("%s: unexpected tar entry type %c", h.Name, h.Typeflag)
		}
		if err == nil {
			err = os.Lchown(p, h.Uid, h.Gid)
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeDir {
			// MkdirAll honours the umask; the image's modes (/tmp's
			// sticky bit) are what the runtime would set.
			if err := os.Chmod(p, os.FileMode(h.Mode).Perm()|modeBits(h.Mode)); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func modeBits(m int64) os.FileMode {
	var out os.FileMode
	if m&0o1000 != 0 {
		out |= os.ModeSticky
	}
	return out
}

// runIn runs args inside root (chroot) as the image's user, the way a
// container runtime starts the entrypoint, and returns what it printed.
func runIn(t *testing.T, root, user string, args ...string) (string, error) {
	t.Helper()
	uid, gid, _ := strings.Cut(user, ":")
	u, err1 := strconv.ParseUint(uid, 10, 32)
	g, err2 := strconv.ParseUint(gid, 10, 32)
	if err1 != nil || err2 != nil {
		t.Fatalf("image user %q is not uid:gid", user)
	}
	var out bytes.Buffer
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root, Credential: &syscall.Credential{Uid: uint32(u), Gid: uint32(g)}}
	err := cmd.Run()
	return out.String(), err
}

// TestImages builds every image as `make images` does, loads each back
// from its docker-archive tarball and its OCI layout, checks the config
// (entrypoint, user, labels), extracts the filesystem and runs the binary
// in it: a missing library or a binary that needs something the image
// lacks fails here.
func TestImages(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("running the images' binaries needs chroot, so root (CI runs as root)")
	}
	bin := binaries(t)
	out := t.TempDir()
	const version, repo = "v1.2.3-test.4", "registry.example.com/team/rota"
	var printed bytes.Buffer
	needApt(t)
	err := run(context.Background(), []string{"images", "--bin-dir", bin, "--out", out, "--version", version,
		"--registry", repo, "--revision", "0123abcd", "--created", "2026-01-02T03:04:05Z",
		"--lock", "base-packages.lock", "--deb-cache", t.TempDir()}, &printed)
	if err != nil {
		t.Fatal(err)
	}
	checks := map[string]struct {
		args []string
		want []string
	}{
		"scheduler":           {[]string{"--version"}, []string{"Kubernetes v"}},
		"schedule-controller": {[]string{"version"}, []string{"Rota "}},
		"dra-kubelet-plugin": {[]string{"discover", "--mock-profile", "dgx-h100", "--node-name", "node-a"},
			[]string{"kind: ResourceSlice", "name: gpu-7", "nodeName: node-a"}},
	}
	t.Run("push", func(t *testing.T) {
		// `make push` against a registry served in-process.
		srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
		defer srv.Close()
		host := strings.TrimPrefix(srv.URL, "http://")
		var pushed bytes.Buffer
		if err := run(context.Background(), []string{"push", "--dir", out, "--registry", host + "/mirror/rota"}, &pushed); err != nil {
			t.Fatal(err)
		}
		for _, s := range specs(bin) {
			ref, err := name.NewTag(host+"/mirror/rota/"+s.Name+":"+version, name.Insecure)
			if err != nil {
				t.Fatal(err)
			}
			img, err := remote.Image(ref)
			if err != nil {
				t.Fatalf("pulling %s back: %v", ref, err)
			}
			built, _, err := oci.ReadLayout(filepath.Join(out, s.Name))
			if err != nil {
				t.Fatal(err)
			}
			got, _ := img.Digest()
			want, _ := built.Digest()
			if got != want {
				t.Errorf("%s: the registry holds %s, make images built %s", ref, got, want)
			}
			if !strings.Contains(pushed.String(), "pushed "+ref.String()+"@"+want.String()) {
				t.Errorf("push printed %q, not %s@%s", pushed.String(), ref, want)
			}
		}
	})
	t.Run("release manifests pin the digests and carry the SBOMs", func(t *testing.T) {
		pins, err := oci.ReadLock("base-packages.lock")
		if err != nil {
			t.Fatal(err)
		}
		rel := filepath.Join(t.TempDir(), "rota.yaml")
		manifestsDir := filepath.Join("..", "..", "manifests")
		var printed bytes.Buffer
		if err := run(context.Background(), []string{"manifests", "--manifests", manifestsDir, "--images", out,
			"--version", version, "--registry", repo, "--out", rel}, &printed); err != nil {
			t.Fatal(err)
		}
		y, err := os.ReadFile(rel)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range specs(bin) {
			built, _, err := oci.ReadLayout(filepath.Join(out, s.Name))
			if err != nil {
				t.Fatal(err)
			}
			digest, _ := built.Digest()
			if want := "image: " + repo + "/" + s.Name + ":" + version + "@" + digest.String(); !strings.Contains(string(y), want) {
				t.Errorf("rota.yaml lacks %q", want)
			}
			f, err := os.Open(filepath.Join(filepath.Dir(rel), s.Name+".cdx.json"))
			if err != nil {
				t.Fatal(err)
			}
			var bom cdx.BOM
			err = cdx.NewBOMDecoder(f, cdx.BOMFileFormatJSON).Decode(&bom)
			_ = f.Close()
			if err != nil {
				t.Fatalf("%s SBOM: %v", s.Name, err)
			}
			if c := bom.Metadata.Component; c == nil || c.Hashes == nil || (*c.Hashes)[0].Value != digest.Hex || c.Version != version {
				t.Errorf("%s SBOM describes %+v, want the image %s of version %s", s.Name, c, digest, version)
			}
			names := map[string]string{}
			for _, c := range *bom.Components {
				names[c.Name] = c.PackageURL
			}
			for _, want := range []string{s.Name, "stdlib", "k8s.io/client-go", "k8s.io/klog/v2"} {
				if _, ok := names[want]; !ok {
					t.Errorf("%s SBOM has no component %s", s.Name, want)
				}
			}
			// Every image's CA bundle is ca-certificates'; the glibc
			// images' C library is libc6.
			for _, p := range pins {
				if p.Arch != "all" && p.Arch != oci.DebianArch(runtime.GOARCH) {
					continue
				}
				used := p.Name == "ca-certificates" || s.Glibc
				if purl := names[p.Name]; (used && purl != p.PURL()) || (!used && purl != "") {
					t.Errorf("%s SBOM: %s %q, want the pinned package %s: %v", s.Name, p.Name, purl, p.PURL(), used)
				}
			}
		}
		err = run(context.Background(), []string{"manifests", "--manifests", manifestsDir, "--images", out,
			"--version", "v9.9.9", "--registry", repo, "--out", rel}, &printed)
		if err == nil || !strings.Contains(err.Error(), "not v9.9.9") {
			t.Errorf("release manifests for another version than the images': %v, want a refusal", err)
		}
	})
	for _, s := range specs(bin) {
		t.Run(s.Name, func(t *testing.T) {
			tag, err := name.NewTag(repo + "/" + s.Name + ":" + version)
			if err != nil {
				t.Fatal(err)
			}
			img, err := tarball.ImageFromPath(filepath.Join(out, s.Name+".tar"), &tag)
			if err != nil {
				t.Fatalf("loading the tarball as %s: %v", tag, err)
			}
			fromLayout, layoutTag, err := oci.ReadLayout(filepath.Join(out, s.Name))
			if err != nil {
				t.Fatal(err)
			}
			// The docker-archive keeps the config and the layers, not the
			// OCI manifest, so the two agree on the image ID (the config's
			// digest); the printed digest is the manifest's, as pushed.
			id1, _ := img.ConfigName()
			id2, _ := fromLayout.ConfigName()
			if layoutTag.String() != tag.String() || id1 != id2 {
				t.Errorf("OCI layout holds %s with image ID %s, tarball %s with %s", layoutTag, id2, tag, id1)
			}
			d, _ := fromLayout.Digest()
			if !strings.Contains(printed.String(), tag.String()+"@"+d.String()) {
				t.Errorf("the command printed %q, not %s@%s", printed.String(), tag, d)
			}
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			c := cf.Config
			if len(c.Entrypoint) != 1 || c.Entrypoint[0] != "/"+s.Name {
				t.Errorf("entrypoint %v, want [/%s]", c.Entrypoint, s.Name)
			}
			wantUser := "65532:65532"
			if s.Name == "dra-kubelet-plugin" {
				wantUser = "0:0"
			}
			if c.User != wantUser {
				t.Errorf("user %q, want %q", c.User, wantUser)
			}
			for k, want := range map[string]string{
				oci.LabelTitle: s.Name, oci.LabelVersion: version, oci.LabelRevision: "0123abcd",
				oci.LabelSource: "https://github.com/rota-dev/rota", oci.LabelCreated: "2026-01-02T03:04:05Z", oci.LabelLicenses: "NOASSERTION",
			} {
				if c.Labels[k] != want {
					t.Errorf("label %s = %q, want %q", k, c.Labels[k], want)
				}
			}
			if cf.OS != "linux" || cf.Architecture == "" {
				t.Errorf("platform %s/%s", cf.OS, cf.Architecture)
			}

			root := t.TempDir()
			extract(t, img, root)
			if passwd, err := os.ReadFile(filepath.Join(root, "etc/passwd")); err != nil || !strings.Contains(string(passwd), "nonroot:x:65532:65532") {
				t.Errorf("/etc/passwd: %q, %v", passwd, err)
			}
			chk := checks[s.Name]
			got, err := runIn(t, root, c.User, append(c.Entrypoint, chk.args...)...)
			if err != nil {
				t.Fatalf("%v in the image: %v\n%s", append(c.Entrypoint, chk.args...), err, got)
			}
			t.Logf("%v in the image printed:\n%s", append(c.Entrypoint, chk.args...), firstLines(got, 6))
			for _, w := range chk.want {
				if !strings.Contains(got, w) {
					t.Errorf("%v printed\n%s\nwant %q", append(c.Entrypoint, chk.args...), got, w)
				}
			}
			if s.Glibc {
				// The check above is only worth something if the image's
				// own C library is what ran: without it the binary fails.
				if _, err := os.Stat(filepath.Join(root, "etc/ld.so.conf.d")); err != nil {
					t.Errorf("no /etc/ld.so.conf.d for the NVIDIA container toolkit: %v", err)
				}
				var libc []string
				for _, pattern := range []string{"lib/*/libc.so.6", "usr/lib/*/libc.so.6", "lib64/libc.so.6", "usr/lib64/libc.so.6"} {
					m, _ := filepath.Glob(filepath.Join(root, pattern))
					libc = append(libc, m...)
				}
				if len(libc) == 0 {
					t.Fatal("no libc.so.6 in the image")
				}
				for _, l := range libc {
					if err := os.Remove(l); err != nil && !errors.Is(err, os.ErrNotExist) {
						t.Fatal(err)
					}
				}
				if got, err := runIn(t, root, c.User, append(c.Entrypoint, chk.args...)...); err == nil {
					t.Errorf("%s ran without libc.so.6 in its image:\n%s", s.Name, got)
				}
			}
		})
	}
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}
