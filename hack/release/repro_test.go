package main

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rota-dev/rota/hack/release/oci"
)

// needApt skips a test that builds images where the machine has no
// apt-get or dpkg-deb to fetch and read the pinned base packages with (not
// Debian or Ubuntu); CI has both.
func needApt(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"apt-get", "dpkg-deb"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the images' base packages are downloaded with apt-get and read with dpkg-deb: %v", err)
		}
	}
}

// TestImagesAreReproducible builds every image twice, each time from a
// fresh download of the pinned packages into an empty cache, and wants the
// same digests and SBOMs; then it checks that each file of the base
// layers is generated here or is, byte for byte, the file at the same path
// of a pinned .deb as dpkg-deb unpacks it: nothing comes from the build
// machine's own /lib or /etc.
func TestImagesAreReproducible(t *testing.T) {
	needApt(t)
	bin := binaries(t)
	build := func() (printed, dir, cache string) {
		dir, cache = t.TempDir(), t.TempDir()
		var out bytes.Buffer
		err := run(context.Background(), []string{"images", "--bin-dir", bin, "--out", dir, "--version", "v1.2.3",
			"--registry", "registry.example.com/rota", "--revision", "0123abcd", "--created", "2026-01-02T03:04:05Z",
			"--lock", "base-packages.lock", "--deb-cache", cache}, &out)
		if err != nil {
			t.Fatal(err)
		}
		return out.String(), dir, cache
	}
	first, dir, cache := build()
	second, dir2, _ := build()
	if first != second {
		t.Errorf("two builds of the same inputs printed different digests:\n%s\n%s", first, second)
	}
	t.Logf("built twice:\n%s", first)
	for _, s := range specs(bin) {
		a, err1 := os.ReadFile(filepath.Join(dir, s.Name+".cdx.json"))
		b, err2 := os.ReadFile(filepath.Join(dir2, s.Name+".cdx.json"))
		if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
			t.Errorf("%s: two builds wrote different SBOMs (%v, %v)", s.Name, err1, err2)
		}
	}

	// The pinned packages as dpkg-deb itself unpacks them.
	debs, err := filepath.Glob(filepath.Join(cache, "*.deb"))
	if err != nil || len(debs) == 0 {
		t.Fatalf("no .deb in the cache %s: %v", cache, err)
	}
	unpacked := t.TempDir()
	for _, deb := range debs {
		if out, err := exec.Command("dpkg-deb", "-x", deb, unpacked).CombinedOutput(); err != nil {
			t.Fatalf("dpkg-deb -x %s: %v\n%s", deb, err, out)
		}
	}
	const caBundle = "etc/ssl/certs/ca-certificates.crt"
	generated := map[string]bool{"etc/passwd": true, "etc/group": true, "etc/ld.so.conf": true}
	bundles := map[string][]byte{}
	for _, s := range specs(bin) {
		img, _, err := oci.ReadLayout(filepath.Join(dir, s.Name))
		if err != nil {
			t.Fatal(err)
		}
		layers, err := img.Layers()
		if err != nil {
			t.Fatal(err)
		}
		rc, err := layers[0].Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		files, libc := 0, false
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case h.Typeflag == tar.TypeSymlink:
				if got, err := os.Readlink(filepath.Join(unpacked, h.Name)); err != nil || got != h.Linkname {
					t.Errorf("%s: link /%s -> %s, the package has %q (%v)", s.Name, h.Name, h.Linkname, got, err)
				}
			case h.Name == caBundle:
				if bundles[s.Name], err = io.ReadAll(tr); err != nil {
					t.Fatal(err)
				}
			case h.Typeflag == tar.TypeReg && !generated[h.Name]:
				got, _ := io.ReadAll(tr)
				want, err := os.ReadFile(filepath.Join(unpacked, h.Name))
				if err != nil || !bytes.Equal(got, want) {
					t.Errorf("%s: /%s is not the pinned package's file (%v)", s.Name, h.Name, err)
				}
				files++
				libc = libc || filepath.Base(h.Name) == "libc.so.6"
			}
		}
		_ = rc.Close()
		if s.Glibc && !libc {
			t.Errorf("%s: no libc.so.6 in the base layer", s.Name)
		}
		t.Logf("%s: %d files of the base layer are the pinned packages' own", s.Name, files)
	}

	// The CA bundle is what update-ca-certificates makes of the package's
	// certificates alone: each, sorted by name, ending in a newline.
	crts, _ := filepath.Glob(filepath.Join(unpacked, "usr/share/ca-certificates/mozilla/*.crt"))
	var want bytes.Buffer
	for _, c := range crts {
		b, err := os.ReadFile(c)
		if err != nil {
			t.Fatal(err)
		}
		want.Write(b)
		if !bytes.HasSuffix(b, []byte("\n")) {
			want.WriteByte('\n')
		}
	}
	if len(crts) == 0 {
		t.Fatal("the pinned ca-certificates has no certificate")
	}
	for _, s := range specs(bin) {
		if got := bundles[s.Name]; !bytes.Equal(got, want.Bytes()) {
			t.Errorf("%s: the CA bundle (%d bytes, %d certificates) is not the %d certificates of the pinned ca-certificates",
				s.Name, len(got), strings.Count(string(got), "BEGIN CERTIFICATE"), len(crts))
		}
	}
}
