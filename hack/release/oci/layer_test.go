package oci

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
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
