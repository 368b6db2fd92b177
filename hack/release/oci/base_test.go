package oci

import (
	"archive/tar"
	"bytes"
	"strings"
	"testing"
)

// debEntry is one entry of a fake package's file system.
type debEntry struct {
	name     string // as dpkg-deb writes it: "./lib/x86_64-linux-gnu/"
	typeflag byte
	body     string // a file's content, or a link's target
}

// fakeDeb builds a package's file system tar in memory, as `dpkg-deb
// --fsys-tarfile` streams it, and reads it with ReadDebTar.
func fakeDeb(t *testing.T, pin Pin, entries ...debEntry) *Deb {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Typeflag: e.typeflag, Mode: 0o644}
		switch e.typeflag {
		case tar.TypeDir:
			h.Mode = 0o755
		case tar.TypeSymlink:
			h.Linkname, h.Mode = e.body, 0o777
		case tar.TypeLink:
			h.Linkname = e.body
		case tar.TypeReg:
			h.Size = int64(len(e.body))
			if strings.Contains(e.name, ".so") {
				h.Mode = 0o755
			}
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if e.typeflag == tar.TypeReg {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	d, err := ReadDebTar(pin, &buf)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// fakeLibc6 lays out libc6 the way Debian 12's package has it: the files
// under /lib/x86_64-linux-gnu, the loader's /lib64 name a link to it.
func fakeLibc6(t *testing.T) *Deb {
	t.Helper()
	return fakeDeb(t, Pin{Name: "libc6", Version: "2.36-9+deb12u14", Arch: "amd64", SHA256: sumA, Distro: "debian-12"},
		debEntry{"./", tar.TypeDir, ""},
		debEntry{"./lib/", tar.TypeDir, ""},
		debEntry{"./lib/x86_64-linux-gnu/", tar.TypeDir, ""},
		debEntry{"./lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", tar.TypeReg, "ld.so"},
		debEntry{"./lib/x86_64-linux-gnu/libc.so.6", tar.TypeReg, "libc"},
		debEntry{"./lib/x86_64-linux-gnu/libm.so.6", tar.TypeReg, "libm"},
		debEntry{"./lib/x86_64-linux-gnu/libdl.so.2", tar.TypeLink, "./lib/x86_64-linux-gnu/libm.so.6"},
		debEntry{"./usr/share/doc/libc6/copyright", tar.TypeReg, "LGPL"},
		debEntry{"./lib64/ld-linux-x86-64.so.2", tar.TypeSymlink, "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"},
	)
}

func fakeCACertificates(t *testing.T) *Deb {
	t.Helper()
	return fakeDeb(t, Pin{Name: "ca-certificates", Version: "20230311+deb12u1", Arch: "all", SHA256: sumB, Distro: "debian-12"},
		debEntry{"./usr/share/ca-certificates/mozilla/B_Root.crt", tar.TypeReg, "B\n"},
		debEntry{"./usr/share/ca-certificates/mozilla/A_Root.crt", tar.TypeReg, "A"}, // no final newline
		debEntry{"./usr/share/ca-certificates/mozilla/README", tar.TypeReg, "not a certificate"},
		debEntry{"./usr/share/doc/ca-certificates/copyright", tar.TypeReg, "MPL"},
	)
}

func TestReadDebTar(t *testing.T) {
	d := fakeLibc6(t)
	if got := strings.Join(d.Paths(), " "); !strings.HasPrefix(got, "/ /lib /lib/x86_64-linux-gnu /lib/x86_64-linux-gnu/ld-linux") {
		t.Errorf("paths %s, want absolute ones without ./", got)
	}
	if b, err := d.ReadFile("/lib/x86_64-linux-gnu/libdl.so.2"); err != nil || string(b) != "libm" {
		t.Errorf("hard link: %q, %v, want libm's content", b, err)
	}
	if p, err := d.Library("libc.so.6"); err != nil || p != "/lib/x86_64-linux-gnu/libc.so.6" {
		t.Errorf("Library(libc.so.6) = %s, %v", p, err)
	}
	if _, err := d.Library("libnvidia-ml.so.1"); err == nil || !strings.Contains(err.Error(), "libnvidia-ml.so.1") {
		t.Errorf("a library the package lacks: %v, want it named", err)
	}
	twice := fakeDeb(t, d.Pin, debEntry{"./lib/a/libx.so.1", tar.TypeReg, "1"}, debEntry{"./lib/b/libx.so.1", tar.TypeReg, "2"})
	if _, err := twice.Library("libx.so.1"); err == nil {
		t.Error("a library found twice was not refused")
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	_ = tw.WriteHeader(&tar.Header{Name: "./dev/null", Typeflag: tar.TypeChar})
	_ = tw.Close()
	if _, err := ReadDebTar(d.Pin, &buf); err == nil {
		t.Error("a device node in a package was accepted")
	}
}

func TestGlibcFromThePackage(t *testing.T) {
	libc := fakeLibc6(t)
	tr := NewTree()
	if err := addGlibc(tr, libc, "/lib64/ld-linux-x86-64.so.2", []string{"libc.so.6", "libdl.so.2"}); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(entries(t, tr), "\n")
	want := strings.Join([]string{
		"etc/ 5 rwxr-xr-x root",
		"etc/ld.so.conf 0 rw-r--r-- root",
		"etc/ld.so.conf.d/ 5 rwxr-xr-x root",
		"lib/ 5 rwxr-xr-x root",
		"lib/x86_64-linux-gnu/ 5 rwxr-xr-x root",
		"lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 0 rwxr-xr-x root",
		"lib/x86_64-linux-gnu/libc.so.6 0 rwxr-xr-x root",
		"lib/x86_64-linux-gnu/libdl.so.2 0 rw-r--r-- root",
		"lib64/ 5 rwxr-xr-x root",
		"lib64/ld-linux-x86-64.so.2 2 rwxrwxrwx root -> /lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
		"usr/ 5 rwxr-xr-x root",
		"usr/share/ 5 rwxr-xr-x root",
		"usr/share/doc/ 5 rwxr-xr-x root",
		"usr/share/doc/libc6/ 5 rwxr-xr-x root",
		"usr/share/doc/libc6/copyright 0 rw-r--r-- root",
	}, "\n")
	if got != want {
		t.Errorf("layer:\n%s\nwant:\n%s", got, want)
	}
	err := addGlibc(NewTree(), libc, "/lib64/ld-linux-x86-64.so.2", []string{"libc.so.6", "libnvidia-ml.so.1"})
	if err == nil || !strings.Contains(err.Error(), "libnvidia-ml.so.1") {
		t.Errorf("a library libc6 lacks: %v, want an error naming it", err)
	}
	if err := addGlibc(NewTree(), libc, "/lib/ld-musl-x86_64.so.1", nil); err == nil {
		t.Error("an interpreter libc6 lacks was accepted")
	}
}

func TestBaseLayerOfAStaticBinary(t *testing.T) {
	ca := fakeCACertificates(t)
	tr, pins, err := BaseLayer(Spec{Name: "scheduler"}, Base{Libc: fakeLibc6(t), CA: ca})
	if err != nil {
		t.Fatal(err)
	}
	if len(pins) != 1 || pins[0] != ca.Pin {
		t.Errorf("packages %v, want only %s", pins, ca.Pin)
	}
	paths := strings.Join(tr.Paths(), " ")
	for _, want := range []string{"/etc/passwd", "/etc/group", "/tmp", "/home/nonroot", caBundle, caCopyright} {
		if !strings.Contains(paths, want) {
			t.Errorf("static base lacks %s: %s", want, paths)
		}
	}
	if strings.Contains(paths, "libc") {
		t.Errorf("static base holds the C library: %s", paths)
	}
	if bundle := string(tr.entries[caBundle].data); bundle != "A\nB\n" {
		t.Errorf("CA bundle %q, want the certificates sorted by name, each ending in a newline", bundle)
	}
	if _, _, err := BaseLayer(Spec{Name: "scheduler"}, Base{}); err == nil {
		t.Error("a base without ca-certificates was accepted")
	}
	if _, _, err := BaseLayer(Spec{Name: "driver", Binary: "driver", Glibc: true}, Base{CA: ca}); err == nil || !strings.Contains(err.Error(), "libc6") {
		t.Errorf("a glibc image without libc6: %v, want an error naming libc6", err)
	}
}

func TestCheckGlibc(t *testing.T) {
	libc := Pin{Name: "libc6", Version: "2.36-9+deb12u14", Arch: "amd64"}
	ok := map[string]string{"GLIBC_2.2.5": "malloc", "GLIBC_2.34": "pthread_create", "GLIBC_2.36": "x", "GLIBC_PRIVATE": "_dl_x"}
	if err := checkGlibc("bin/driver", ok, libc); err != nil {
		t.Errorf("versions up to 2.36 on glibc 2.36: %v", err)
	}
	newer := map[string]string{"GLIBC_2.34": "pthread_create", "GLIBC_2.38": "__isoc23_strtol"}
	err := checkGlibc("bin/driver", newer, libc)
	if err == nil || !strings.Contains(err.Error(), "GLIBC_2.38 (__isoc23_strtol)") || !strings.Contains(err.Error(), "glibc 2.36") ||
		strings.Contains(err.Error(), "GLIBC_2.34") {
		t.Errorf("a binary linked on glibc 2.38: %v, want an error naming GLIBC_2.38 alone and glibc 2.36", err)
	}
}
