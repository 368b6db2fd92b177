package oci

import (
	"bytes"
	"fmt"
	"path"
)

// Base is what the base layers are made of: the pinned Debian packages,
// read from their .debs.
type Base struct {
	// Libc is libc6 of the images' architecture, the glibc images' C
	// library; nil where the lock pins none for it.
	Libc *Deb
	// CA is ca-certificates, every image's CA bundle.
	CA *Deb
}

// The packages a Base is made of.
const (
	libcPackage = "libc6"
	caPackage   = "ca-certificates"
)

const (
	passwd = "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	group  = "root:x:0:\nnonroot:x:65532:\n"
	// caBundle is where Debian, Ubuntu and Alpine keep the CA bundle, and
	// the first place Go's crypto/x509 looks on Linux.
	caBundle = "/etc/ssl/certs/ca-certificates.crt"
	// caCerts holds ca-certificates' certificates, one PEM file each.
	caCerts = "/usr/share/ca-certificates/mozilla"
	// The packages' licence texts.
	libcCopyright = "/usr/share/doc/libc6/copyright"
	caCopyright   = "/usr/share/doc/ca-certificates/copyright"
)

// DebianArch is Debian's name of a Go architecture (GOARCH).
func DebianArch(goarch string) string {
	switch goarch {
	case "386":
		return "i386"
	case "arm":
		return "armhf"
	case "ppc64le":
		return "ppc64el"
	default:
		return goarch
	}
}

// LoadBase reads the lock file, fetches its packages for goarch (and the
// architecture-independent ones) into cacheDir and opens them.
func LoadBase(lockFile, cacheDir, goarch string) (Base, error) {
	pins, err := ReadLock(lockFile)
	if err != nil {
		return Base{}, err
	}
	arch := DebianArch(goarch)
	var b Base
	for _, p := range pins {
		if p.Arch != arch && p.Arch != "all" {
			continue
		}
		var slot **Deb
		switch p.Name {
		case libcPackage:
			slot = &b.Libc
		case caPackage:
			slot = &b.CA
		default:
			return Base{}, fmt.Errorf("%s pins %s, which no base layer uses", lockFile, p)
		}
		file, err := Fetch(p, cacheDir)
		if err != nil {
			return Base{}, err
		}
		if *slot, err = OpenDeb(p, file); err != nil {
			return Base{}, err
		}
	}
	if b.CA == nil {
		return Base{}, fmt.Errorf("%s pins no %s: make base-lock", lockFile, caPackage)
	}
	return b, nil
}

// BaseLayer is what every image has besides its binary: /etc/passwd and
// /etc/group with root and nonroot, their home directories, /tmp, the CA
// bundle of the pinned ca-certificates and, for a glibc binary, the files
// of the pinned libc6 it needs. It returns the packages it took files
// from.
func BaseLayer(s Spec, b Base) (*Tree, []Pin, error) {
	t := NewTree()
	for _, err := range []error{
		t.File("/etc/passwd", 0o644, []byte(passwd)),
		t.File("/etc/group", 0o644, []byte(group)),
		t.Dir("/root", 0o700, 0, 0),
		t.Dir("/home/nonroot", 0o700, NonRoot, NonRoot),
		t.Dir("/tmp", 0o1777, 0, 0),
	} {
		if err != nil {
			return nil, nil, err
		}
	}
	if b.CA == nil {
		return nil, nil, fmt.Errorf("no %s package for the CA bundle", caPackage)
	}
	bundle, err := CABundle(b.CA)
	if err != nil {
		return nil, nil, err
	}
	if err := t.File(caBundle, 0o644, bundle); err != nil {
		return nil, nil, err
	}
	if err := b.CA.CopyTo(t, caCopyright); err != nil {
		return nil, nil, err
	}
	pins := []Pin{b.CA.Pin}
	if !s.Glibc {
		return t, pins, nil
	}
	if b.Libc == nil {
		return nil, nil, fmt.Errorf("%s: the lock pins no %s for this architecture: make base-lock", s.Binary, libcPackage)
	}
	l, err := readLinking(s.Binary)
	if err != nil {
		return nil, nil, err
	}
	if err := checkGlibc(s.Binary, l.glibc, b.Libc.Pin); err != nil {
		return nil, nil, err
	}
	if err := addGlibc(t, b.Libc, l.interp, append(l.needed, s.GlibcExtra...)); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", s.Binary, err)
	}
	return t, append(pins, b.Libc.Pin), nil
}

// addGlibc adds the loader interp and the libraries libs (base names) from
// the libc6 package, with its licence and the loader's configuration.
func addGlibc(t *Tree, libc *Deb, interp string, libs []string) error {
	if err := libc.CopyTo(t, interp); err != nil {
		return fmt.Errorf("ELF interpreter: %w", err)
	}
	for _, l := range libs {
		p, err := libc.Library(l)
		if err != nil {
			return err
		}
		if err := libc.CopyTo(t, p); err != nil {
			return err
		}
	}
	// The NVIDIA container toolkit adds a file under /etc/ld.so.conf.d and
	// rebuilds the cache when it mounts the driver's libraries.
	if err := t.File("/etc/ld.so.conf", 0o644, []byte("include /etc/ld.so.conf.d/*.conf\n")); err != nil {
		return err
	}
	if err := t.Dir("/etc/ld.so.conf.d", 0o755, 0, 0); err != nil {
		return err
	}
	return libc.CopyTo(t, libcCopyright)
}

// CABundle is the bundle update-ca-certificates writes from the package's
// certificates alone: every mozilla/*.crt, sorted by name, concatenated,
// each ending in a newline. Generated here, it depends on the package
// only, not on what the build machine trusts.
func CABundle(ca *Deb) ([]byte, error) {
	var b bytes.Buffer
	for _, p := range ca.Paths() {
		if path.Dir(p) != caCerts || path.Ext(p) != ".crt" {
			continue
		}
		pem, err := ca.ReadFile(p)
		if err != nil {
			return nil, err
		}
		b.Write(pem)
		if !bytes.HasSuffix(pem, []byte("\n")) {
			b.WriteByte('\n')
		}
	}
	if b.Len() == 0 {
		return nil, fmt.Errorf("%s has no certificate under %s", ca.Pin, caCerts)
	}
	return b.Bytes(), nil
}
