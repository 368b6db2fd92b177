package oci

import (
	"cmp"
	"debug/elf"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// linking is what the dynamic loader needs to start a binary.
type linking struct {
	// interp is the ELF interpreter (PT_INTERP), /lib64/ld-linux-x86-64.so.2;
	// empty for a static binary.
	interp string
	// needed are the libraries the binary names (DT_NEEDED).
	needed []string
	// glibc maps each GLIBC_x.y symbol version the binary imports to one
	// symbol that needs it.
	glibc map[string]string
}

func readLinking(binary string) (linking, error) {
	f, err := elf.Open(binary)
	if err != nil {
		return linking{}, fmt.Errorf("%s: %w", binary, err)
	}
	defer func() { _ = f.Close() }()
	var l linking
	for _, p := range f.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		b := make([]byte, p.Filesz)
		if _, err := p.ReadAt(b, 0); err != nil {
			return linking{}, fmt.Errorf("%s: PT_INTERP: %w", binary, err)
		}
		l.interp = strings.TrimRight(string(b), "\x00")
	}
	if l.interp == "" {
		return l, nil
	}
	if l.needed, err = f.ImportedLibraries(); err != nil {
		return linking{}, fmt.Errorf("%s: DT_NEEDED: %w", binary, err)
	}
	syms, err := f.ImportedSymbols()
	if err != nil {
		return linking{}, fmt.Errorf("%s: imported symbols: %w", binary, err)
	}
	l.glibc = map[string]string{}
	for _, s := range syms {
		if strings.HasPrefix(s.Version, "GLIBC_") {
			l.glibc[s.Version] = s.Name
		}
	}
	return l, nil
}

// checkGlibc refuses a binary that imports a symbol version newer than
// the pinned C library, upstream (2.36): linked on a newer glibc, it
// would stop at start with "version `GLIBC_2.38' not found".
func checkGlibc(binary string, versions map[string]string, libc Pin) error {
	have := parseVersion(libc.Upstream())
	var newer []string
	for v, sym := range versions {
		n, ok := strings.CutPrefix(v, "GLIBC_")
		if !ok || parseVersion(n) == nil {
			continue // GLIBC_PRIVATE and the like: not a release
		}
		if compareVersions(parseVersion(n), have) > 0 {
			newer = append(newer, fmt.Sprintf("%s (%s)", v, sym))
		}
	}
	if len(newer) == 0 {
		return nil
	}
	slices.Sort(newer)
	return fmt.Errorf("%s needs %s, newer than the image's C library, %s (glibc %s): "+
		"build it on a system with glibc %s or older, or pin a newer libc6 (make base-lock)",
		binary, strings.Join(newer, ", "), libc, libc.Upstream(), libc.Upstream())
}

// parseVersion reads "2.2.5" as [2 2 5]; nil where it is not all numbers.
func parseVersion(s string) []int {
	var out []int
	for f := range strings.SplitSeq(s, ".") {
		n, err := strconv.Atoi(f)
		if err != nil || n < 0 {
			return nil
		}
		out = append(out, n)
	}
	return out
}

func compareVersions(a, b []int) int {
	for i := range max(len(a), len(b)) {
		var x, y int
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if c := cmp.Compare(x, y); c != 0 {
			return c
		}
	}
	return 0
}

// checkLinkage refuses a dynamically linked binary for an image without
// the C library, where it would fail with a bare "no such file or
// directory" at start.
func checkLinkage(s Spec) error {
	l, err := readLinking(s.Binary)
	if err != nil {
		return err
	}
	dynamic := l.interp != ""
	if dynamic && !s.Glibc {
		return fmt.Errorf("%s is dynamically linked: build it with CGO_ENABLED=0 for a static image", s.Binary)
	}
	if !dynamic && s.Glibc {
		return fmt.Errorf("%s is static, but its image is meant to ship the C library", s.Binary)
	}
	return nil
}
