package oci

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
)

// LockFile is the lock of the base layers' Debian packages, relative to
// the repository's root.
const LockFile = "hack/release/base-packages.lock"

// Pin is one Debian package of the base layers, as the lock names it.
type Pin struct {
	Name, Version, Arch string
	// SHA256 is the .deb's, in hex: the same name and version rebuilt
	// into a different file is refused.
	SHA256 string
	// Distro is the Debian release the package comes from (debian-12),
	// for its package URL.
	Distro string
}

func (p Pin) String() string { return fmt.Sprintf("%s %s (%s)", p.Name, p.Version, p.Arch) }

// PURL is the package's package URL, as SBOM scanners look it up.
func (p Pin) PURL() string {
	return fmt.Sprintf("pkg:deb/debian/%s@%s?arch=%s&distro=%s", p.Name, p.Version, p.Arch, p.Distro)
}

// Upstream is the version without its epoch and Debian revision: 2.36 of
// 2.36-9+deb12u14.
func (p Pin) Upstream() string {
	v := p.Version
	if _, after, ok := strings.Cut(v, ":"); ok {
		v = after
	}
	if i := strings.LastIndex(v, "-"); i >= 0 {
		v = v[:i]
	}
	return v
}

// fileName is where the package is kept in the download cache: apt's own
// name for it, with an epoch's colon spelled %3a as apt does.
func (p Pin) fileName() string {
	return strings.ReplaceAll(fmt.Sprintf("%s_%s_%s.deb", p.Name, p.Version, p.Arch), ":", "%3a")
}

// The lock's words go to apt-get as arguments: nothing there may look like
// an option, and a hash is a hash.
var (
	debName    = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]+$`)
	debVersion = regexp.MustCompile(`^[0-9A-Za-z.+~:-]+$`)
	debArch    = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)
	sha256Hex  = regexp.MustCompile(`^[0-9a-f]{64}$`)
	distroName = regexp.MustCompile(`^[a-z0-9]+-[0-9a-z.]+$`)
)

func (p Pin) validate() error {
	switch {
	case !debName.MatchString(p.Name):
		return fmt.Errorf("package name %q", p.Name)
	case !debVersion.MatchString(p.Version):
		return fmt.Errorf("%s: version %q", p.Name, p.Version)
	case !debArch.MatchString(p.Arch):
		return fmt.Errorf("%s: architecture %q", p.Name, p.Arch)
	case !sha256Hex.MatchString(p.SHA256):
		return fmt.Errorf("%s: sha256 %q is not 64 lower-case hex digits", p.Name, p.SHA256)
	}
	return nil
}

// ParseLock reads a lock: comments (#) and blank lines, one line
// "distro <ID>-<VERSION_ID>" (debian-12), then one line per package,
// "<name> <version> <architecture> <sha256 of the .deb>".
func ParseLock(r io.Reader) ([]Pin, error) {
	var pins []Pin
	distro := ""
	seen := map[string]bool{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if f[0] == "distro" {
			if len(f) != 2 || !distroName.MatchString(f[1]) || distro != "" {
				return nil, fmt.Errorf("line %d: want one line \"distro debian-12\"", n)
			}
			distro = f[1]
			continue
		}
		if len(f) != 4 {
			return nil, fmt.Errorf("line %d: want \"name version architecture sha256\", got %d words", n, len(f))
		}
		p := Pin{Name: f[0], Version: f[1], Arch: f[2], SHA256: f[3]}
		if err := p.validate(); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		key := p.Name + ":" + p.Arch
		if seen[key] {
			return nil, fmt.Errorf("line %d: %s pinned twice", n, key)
		}
		seen[key] = true
		pins = append(pins, p)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if distro == "" {
		return nil, errors.New("no \"distro\" line")
	}
	for i := range pins {
		pins[i].Distro = distro
	}
	return pins, nil
}

// ReadLock reads the lock file.
func ReadLock(file string) ([]Pin, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("%w (make base-lock writes it)", err)
	}
	defer func() { _ = f.Close() }()
	pins, err := ParseLock(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return pins, nil
}

// FormatLock is the lock of pins, all of one distro, as ParseLock reads
// it.
func FormatLock(pins []Pin) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(`# The Debian packages the images' base layers are made of (hack/release).
# make images downloads exactly these with apt-get download and refuses a
# .deb whose sha256 differs. make base-lock rewrites this file with apt's
# candidate versions (run apt-get update first).
#
# name version architecture sha256-of-the-.deb
`)
	for i, p := range pins {
		if err := p.validate(); err != nil {
			return nil, err
		}
		if !distroName.MatchString(p.Distro) || p.Distro != pins[0].Distro {
			return nil, fmt.Errorf("%s: distro %q, want one distro for all packages", p.Name, p.Distro)
		}
		if i == 0 {
			fmt.Fprintf(&b, "distro %s\n", p.Distro)
		}
		fmt.Fprintf(&b, "%s %s %s %s\n", p.Name, p.Version, p.Arch, p.SHA256)
	}
	return b.Bytes(), nil
}
