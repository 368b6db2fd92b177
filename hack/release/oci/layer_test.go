package oci

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// entries reads a layer's tar stream back as "name type mode uid link".
func entries(t *testing.T, tr *Tree) []string {
	t.Helper()
	b, err := tr.Tar(time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	r := tar.NewReader(bytes.NewReader(b))
	var out []string
	for {
		h, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		s := h.Name + " " + string(h.Typeflag) + " " + strings.TrimLeft(os.FileMode(h.Mode).String(), "-") + " " + owner(h.Uid)
		if h.Linkname != "" {
			s += " -> " + h.Linkname
		}
		out = append(out, s)
	}
}

func owner(uid int) string {
	if uid == 0 {
		return "root"
	}
	return strconv.Itoa(uid)
}

func TestTreeAddsParentsAndRefusesClashes(t *testing.T) {
	tr := NewTree()
	if err := tr.File("/etc/ssl/certs/ca.crt", 0o644, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := tr.Dir("/home/nonroot", 0o700, NonRoot, NonRoot); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(entries(t, tr), "\n")
	want := strings.Join([]string{
		"etc/ 5 rwxr-xr-x root",
		"etc/ssl/ 5 rwxr-xr-x root",
		"etc/ssl/certs/ 5 rwxr-xr-x root",
		"etc/ssl/certs/ca.crt 0 rw-r--r-- root",
		"home/ 5 rwxr-xr-x root",
		"home/nonroot/ 5 rwx------ 65532",
	}, "\n")
	if got != want {
		t.Errorf("layer:\n%s\nwant:\n%s", got, want)
	}
	if err := tr.Dir("/etc/ssl/certs/ca.crt", 0o755, 0, 0); err == nil {
		t.Error("a directory over a file was accepted")
	}
	if err := tr.File("/etc/ssl", 0o644, nil); err == nil {
		t.Error("a file over a directory was accepted")
	}
	if err := tr.Symlink("/etc", "/elsewhere"); err == nil {
		t.Error("a link over a directory was accepted")
	}
	if err := tr.File("relative/path", 0o644, nil); err == nil {
		t.Error("a relative path was accepted")
	}
}

func TestTreeTarIsReproducible(t *testing.T) {
	build := func() []byte {
		tr := NewTree()
		for _, p := range []string{"/b", "/a/z", "/a/y"} {
			if err := tr.File(p, 0o644, []byte(p)); err != nil {
				t.Fatal(err)
			}
		}
		b, err := tr.Tar(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if !bytes.Equal(build(), build()) {
		t.Error("the same tree gave two different tar streams")
	}
}

func TestParseLdd(t *testing.T) {
	out := []byte(`	linux-vdso.so.1 (0x00007ffd5b1e5000)
	libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f2a1c400000)
	/lib64/ld-linux-x86-64.so.2 (0x00007f2a1c6b5000)
`)
	got, err := ParseLdd(out)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, " ") != "/lib/x86_64-linux-gnu/libc.so.6 /lib64/ld-linux-x86-64.so.2" {
		t.Errorf("ParseLdd = %v", got)
	}
	if _, err := ParseLdd([]byte("\tlibnvidia-ml.so.1 => not found\n\tlibc.so.6 => /lib/libc.so.6 (0x1)\n")); err == nil || !strings.Contains(err.Error(), "libnvidia-ml.so.1") {
		t.Errorf("a library ldd did not find: err = %v, want it named", err)
	}
	if _, err := ParseLdd([]byte("\tnot a dynamic executable\n")); err == nil {
		t.Error("a static binary's ldd output gave no error")
	}
}

// fakeHost lays out a merged-/usr root the way Debian 12 has it.
func fakeHost(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"usr/lib/x86_64-linux-gnu", "usr/lib64", "etc/ssl/certs", "usr/share/doc/libc6"} {
		must(os.MkdirAll(filepath.Join(root, d), 0o755))
	}
	must(os.Symlink("usr/lib", filepath.Join(root, "lib")))
	must(os.Symlink("usr/lib64", filepath.Join(root, "lib64")))
	for _, f := range []string{"libc.so.6", "ld-linux-x86-64.so.2", "libm.so.6"} {
		must(os.WriteFile(filepath.Join(root, "usr/lib/x86_64-linux-gnu", f), []byte(f), 0o755))
	}
	must(os.Symlink("/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", filepath.Join(root, "usr/lib64/ld-linux-x86-64.so.2")))
	must(os.WriteFile(filepath.Join(root, caBundle), []byte("certs"), 0o644))
	must(os.WriteFile(filepath.Join(root, glibcCopyright), []byte("LGPL"), 0o644))
	return root
}

func TestCopyHostPathKeepsLinks(t *testing.T) {
	root := fakeHost(t)
	tr := NewTree()
	if err := tr.CopyHostPath(root, "/lib64/ld-linux-x86-64.so.2"); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(entries(t, tr), "\n")
	want := strings.Join([]string{
		"lib 2 rwxrwxrwx root -> usr/lib",
		"lib64 2 rwxrwxrwx root -> usr/lib64",
		"usr/ 5 rwxr-xr-x root",
		"usr/lib/ 5 rwxr-xr-x root",
		"usr/lib/x86_64-linux-gnu/ 5 rwxr-xr-x root",
		"usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 0 rwxr-xr-x root",
		"usr/lib64/ 5 rwxr-xr-x root",
		"usr/lib64/ld-linux-x86-64.so.2 2 rwxrwxrwx root -> /lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
	}, "\n")
	if got != want {
		t.Errorf("layer:\n%s\nwant:\n%s", got, want)
	}
	if err := tr.CopyHostPath(root, "/lib/x86_64-linux-gnu/missing.so"); err == nil {
		t.Error("a missing file was copied")
	}
}

func TestBaseLayer(t *testing.T) {
	root := fakeHost(t)
	ldd := func(string) ([]byte, error) {
		return []byte("\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x1)\n\t/lib64/ld-linux-x86-64.so.2 (0x2)\n"), nil
	}
	static, err := BaseLayer(Spec{Name: "scheduler"}, Host{Root: root, Ldd: ldd})
	if err != nil {
		t.Fatal(err)
	}
	paths := strings.Join(static.Paths(), " ")
	for _, want := range []string{"/etc/passwd", "/etc/group", "/tmp", "/home/nonroot", caBundle} {
		if !strings.Contains(paths, want) {
			t.Errorf("static base lacks %s: %s", want, paths)
		}
	}
	if strings.Contains(paths, "libc") {
		t.Errorf("static base holds the C library: %s", paths)
	}
	glibc, err := BaseLayer(Spec{Name: "driver", Glibc: true, GlibcExtra: []string{"libm.so.6"}}, Host{Root: root, Ldd: ldd})
	if err != nil {
		t.Fatal(err)
	}
	paths = strings.Join(glibc.Paths(), " ")
	for _, want := range []string{"/usr/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libm.so.6", "/usr/lib64/ld-linux-x86-64.so.2", "/etc/ld.so.conf.d", glibcCopyright} {
		if !strings.Contains(paths, want) {
			t.Errorf("glibc base lacks %s: %s", want, paths)
		}
	}
	if _, err := BaseLayer(Spec{Name: "driver", Glibc: true, GlibcExtra: []string{"libnothere.so.1"}}, Host{Root: root, Ldd: ldd}); err == nil {
		t.Error("a missing extra library gave no error")
	}
}
