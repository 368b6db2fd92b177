package oci

import (
	"archive/tar"
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// Deb is the file system of one pinned Debian package (its data.tar),
// read into memory: base layers take their files from here, never from
// the build machine's own /lib or /etc.
type Deb struct {
	Pin   Pin
	files map[string]debFile
}

// debFile is one entry of a package's file system.
type debFile struct {
	typeflag byte // tar.TypeReg, TypeDir or TypeSymlink
	mode     int64
	data     []byte
	linkname string
}

// ReadDebTar reads a package's file system as `dpkg-deb --fsys-tarfile`
// writes it (entries "./lib/...") into a Deb.
func ReadDebTar(pin Pin, r io.Reader) (*Deb, error) {
	d := &Deb{Pin: pin, files: map[string]debFile{}}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return d, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", pin, err)
		}
		p := path.Clean("/" + strings.TrimPrefix(h.Name, "./"))
		f := debFile{typeflag: h.Typeflag, mode: h.Mode & 0o7777, linkname: h.Linkname}
		switch h.Typeflag {
		case tar.TypeDir, tar.TypeSymlink:
		case tar.TypeReg:
			if f.data, err = io.ReadAll(tr); err != nil {
				return nil, fmt.Errorf("%s: %s: %w", pin, p, err)
			}
		case tar.TypeLink:
			// A hard link names an earlier entry of the same archive.
			target, ok := d.files[path.Clean("/"+strings.TrimPrefix(h.Linkname, "./"))]
			if !ok || target.typeflag != tar.TypeReg {
				return nil, fmt.Errorf("%s: %s: hard link to %s, which is no earlier file", pin, p, h.Linkname)
			}
			f = debFile{typeflag: tar.TypeReg, mode: f.mode, data: target.data}
		default:
			return nil, fmt.Errorf("%s: %s: unexpected entry type %q", pin, p, h.Typeflag)
		}
		d.files[p] = f
	}
}

// OpenDeb reads the package file with dpkg-deb, which unpacks whatever
// compression the .deb uses; the build machine's installed files play no
// part.
func OpenDeb(pin Pin, file string) (*Deb, error) {
	cmd := exec.Command("dpkg-deb", "--fsys-tarfile", file)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("dpkg-deb --fsys-tarfile %s: %w (dpkg-deb comes with dpkg)", file, err)
	}
	d, readErr := ReadDebTar(pin, out)
	if readErr != nil {
		// Drain the pipe so that dpkg-deb is not left blocked on a write.
		_, _ = io.Copy(io.Discard, out)
	}
	if err := cmd.Wait(); err != nil {
		return nil, fmt.Errorf("dpkg-deb --fsys-tarfile %s: %w: %s", file, err, strings.TrimSpace(stderr.String()))
	}
	return d, readErr
}

// Paths lists the package's paths, sorted.
func (d *Deb) Paths() []string {
	ps := make([]string, 0, len(d.files))
	for p := range d.files {
		ps = append(ps, p)
	}
	sort.Strings(ps)
	return ps
}

// ReadFile returns the content of the regular file p of the package.
func (d *Deb) ReadFile(p string) ([]byte, error) {
	f, ok := d.files[p]
	if !ok || f.typeflag != tar.TypeReg {
		return nil, fmt.Errorf("%s has no file %s", d.Pin, p)
	}
	return f.data, nil
}

// Library is the path of the shared library the package ships as name
// (libc.so.6): its one file or link of that base name.
func (d *Deb) Library(name string) (string, error) {
	var found []string
	for _, p := range d.Paths() {
		f := d.files[p]
		if path.Base(p) == name && f.typeflag != tar.TypeDir {
			found = append(found, p)
		}
	}
	switch len(found) {
	case 0:
		return "", fmt.Errorf("%s has no library %s", d.Pin, name)
	case 1:
		return found[0], nil
	default:
		return "", fmt.Errorf("%s has %s more than once: %s", d.Pin, name, strings.Join(found, ", "))
	}
}

// CopyTo adds the package's entry p to t at the same path with the same
// mode; a symbolic link arrives as a link, followed by what it points to
// (so the loader's /lib64/ld-linux-x86-64.so.2 brings the file it names).
func (d *Deb) CopyTo(t *Tree, p string) error {
	for range 40 {
		f, ok := d.files[p]
		if !ok {
			return fmt.Errorf("%s has no %s", d.Pin, p)
		}
		switch f.typeflag {
		case tar.TypeReg:
			return t.File(p, f.mode, f.data)
		case tar.TypeDir:
			return t.Dir(p, f.mode, 0, 0)
		}
		if err := t.Symlink(p, f.linkname); err != nil {
			return err
		}
		if path.IsAbs(f.linkname) {
			p = path.Clean(f.linkname)
		} else {
			p = path.Join(path.Dir(p), f.linkname)
		}
	}
	return fmt.Errorf("%s: %s: too many levels of symbolic links", d.Pin, p)
}

// Fetch returns the file of pin in cacheDir: the cached one when its
// SHA-256 is the lock's, otherwise downloaded with `apt-get download`
// from the build machine's configured sources and checked against the
// lock. A .deb with another hash is refused.
func Fetch(pin Pin, cacheDir string) (string, error) {
	file := filepath.Join(cacheDir, pin.fileName())
	if sum, err := fileSHA256(file); err == nil && sum == pin.SHA256 {
		return file, nil
	}
	got, cleanup, err := download(pin.Name+":"+pin.Arch+"="+pin.Version, cacheDir)
	if err != nil {
		return "", fmt.Errorf("pinned %s: %w", pin, err)
	}
	defer cleanup()
	sum, err := fileSHA256(got)
	if err != nil {
		return "", err
	}
	if sum != pin.SHA256 {
		return "", fmt.Errorf("pinned %s: the downloaded .deb has sha256 %s, the lock %s: refusing it "+
			"(a rebuilt package under the same version, or a lock edited by hand; make base-lock pins what apt serves now)",
			pin, sum, pin.SHA256)
	}
	if err := os.Rename(got, file); err != nil {
		return "", err
	}
	return file, nil
}

// Resolve pins the package spec, NAME[:ARCH][=VERSION], at VERSION or,
// without one, at apt's candidate: it downloads the .deb into cacheDir and
// records its name, version and architecture as the .deb's control file
// says, and its SHA-256.
func Resolve(spec, distro, cacheDir string) (Pin, error) {
	pkg, version, _ := strings.Cut(spec, "=")
	name, arch, hasArch := strings.Cut(pkg, ":")
	if !debName.MatchString(name) || (hasArch && !debArch.MatchString(arch)) || (version != "" && !debVersion.MatchString(version)) {
		return Pin{}, fmt.Errorf("%q is not NAME[:ARCH][=VERSION]", spec)
	}
	if version == "" {
		var err error
		if version, err = candidate(pkg); err != nil {
			return Pin{}, err
		}
	}
	got, cleanup, err := download(pkg+"="+version, cacheDir)
	if err != nil {
		return Pin{}, err
	}
	defer cleanup()
	out, err := exec.Command("dpkg-deb", "--field", got, "Package", "Version", "Architecture").Output()
	if err != nil {
		return Pin{}, fmt.Errorf("dpkg-deb --field %s: %w", got, err)
	}
	fields := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ": "); ok {
			fields[k] = strings.TrimSpace(v)
		}
	}
	pin := Pin{Name: fields["Package"], Version: fields["Version"], Arch: fields["Architecture"], Distro: distro}
	if pin.SHA256, err = fileSHA256(got); err != nil {
		return Pin{}, err
	}
	if err := pin.validate(); err != nil {
		return Pin{}, fmt.Errorf("%s: control file: %w", got, err)
	}
	if err := os.Rename(got, filepath.Join(cacheDir, pin.fileName())); err != nil {
		return Pin{}, err
	}
	return pin, nil
}

// candidate is the version `apt-get install pkg` would install.
func candidate(pkg string) (string, error) {
	out, err := exec.Command("apt-cache", "policy", pkg).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("apt-cache policy %s: %w: %s", pkg, err, strings.TrimSpace(string(out)))
	}
	for line := range strings.Lines(string(out)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "Candidate:"); ok {
			if v = strings.TrimSpace(v); v != "" && v != "(none)" {
				return v, nil
			}
		}
	}
	return "", fmt.Errorf("apt has no candidate version of %s: run apt-get update", pkg)
}

// download fetches one package with `apt-get download spec` into a fresh
// directory under dir and returns its file and what removes the directory.
func download(spec, dir string) (string, func(), error) {
	if _, err := exec.LookPath("apt-get"); err != nil {
		return "", nil, fmt.Errorf("the base layers are pinned Debian packages, downloaded with apt-get: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", nil, err
	}
	tmp, err := os.MkdirTemp(dir, "download-")
	if err != nil {
		return "", nil, err
	}
	cleanup := func() { _ = os.RemoveAll(tmp) }
	cmd := exec.Command("apt-get", "download", "-q", spec)
	cmd.Dir = tmp
	if out, err := cmd.CombinedOutput(); err != nil {
		cleanup()
		msg := strings.TrimSpace(string(out))
		if strings.Contains(msg, "was not found") || strings.Contains(msg, "Unable to locate package") {
			return "", nil, fmt.Errorf("apt-get download %s: apt knows no such version (%s): run apt-get update, "+
				"or make base-lock to pin the versions apt has now: %w", spec, msg, err)
		}
		return "", nil, fmt.Errorf("apt-get download %s: cannot download it (%s): run apt-get update, "+
			"or make base-lock to pin the versions apt has now: %w", spec, msg, err)
	}
	debs, err := filepath.Glob(filepath.Join(tmp, "*.deb"))
	if err != nil || len(debs) != 1 {
		cleanup()
		return "", nil, fmt.Errorf("apt-get download %s wrote %d .deb files, want 1", spec, len(debs))
	}
	return debs[0], cleanup, nil
}

func fileSHA256(file string) (string, error) {
	f, err := os.Open(file)
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("%s: %w", file, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
