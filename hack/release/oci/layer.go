// Package oci assembles Rota's container images with go-containerregistry:
// no Docker daemon and no base image to pull. An image is a base layer
// (users, CA certificates and, for the cgo binaries, the C library, taken
// from Debian packages pinned in base-packages.lock) and an
// application layer (the binary), an OCI config with the entrypoint, the
// user and the org.opencontainers.image labels, written as an OCI layout
// and a docker-archive tarball, or pushed to a registry.
package oci

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// entry is one file, directory or symbolic link of a layer.
type entry struct {
	mode     int64 // permission bits
	typeflag byte
	data     []byte
	linkname string
	uid, gid int
}

// Tree is the content of one layer, keyed by absolute path. Parent
// directories are added on demand, owned by root, mode 0755.
type Tree struct {
	entries map[string]entry
}

// NewTree returns an empty layer.
func NewTree() *Tree { return &Tree{entries: map[string]entry{}} }

func clean(p string) (string, error) {
	if !strings.HasPrefix(p, "/") {
		return "", fmt.Errorf("path %q is not absolute", p)
	}
	return path.Clean(p), nil
}

func (t *Tree) parents(p string) {
	for d := path.Dir(p); d != "/"; d = path.Dir(d) {
		if _, ok := t.entries[d]; !ok {
			t.entries[d] = entry{mode: 0o755, typeflag: tar.TypeDir}
		}
	}
}

// Dir adds a directory owned by uid:gid.
func (t *Tree) Dir(p string, mode int64, uid, gid int) error {
	p, err := clean(p)
	if err != nil {
		return err
	}
	if e, ok := t.entries[p]; ok && e.typeflag != tar.TypeDir {
		return fmt.Errorf("%s: already added as a non-directory", p)
	}
	t.parents(p)
	t.entries[p] = entry{mode: mode, typeflag: tar.TypeDir, uid: uid, gid: gid}
	return nil
}

// File adds a regular file owned by root.
func (t *Tree) File(p string, mode int64, data []byte) error {
	p, err := clean(p)
	if err != nil {
		return err
	}
	if e, ok := t.entries[p]; ok && e.typeflag == tar.TypeDir {
		return fmt.Errorf("%s: already added as a directory", p)
	}
	t.parents(p)
	t.entries[p] = entry{mode: mode, typeflag: tar.TypeReg, data: data}
	return nil
}

// Symlink adds a symbolic link p -> target.
func (t *Tree) Symlink(p, target string) error {
	p, err := clean(p)
	if err != nil {
		return err
	}
	if e, ok := t.entries[p]; ok && (e.typeflag != tar.TypeSymlink || e.linkname != target) {
		return fmt.Errorf("%s: already added as something else than a link to %s", p, target)
	}
	t.parents(p)
	t.entries[p] = entry{mode: 0o777, typeflag: tar.TypeSymlink, linkname: target}
	return nil
}

// Paths lists the layer's paths in the order they are written.
func (t *Tree) Paths() []string {
	ps := make([]string, 0, len(t.entries))
	for p := range t.entries {
		ps = append(ps, p)
	}
	sort.Strings(ps)
	return ps
}

// Tar writes the layer as an uncompressed tar stream. Every entry has
// modification time mtime, so that the same inputs give the same digest.
func (t *Tree) Tar(mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range t.Paths() {
		e := t.entries[p]
		name := strings.TrimPrefix(p, "/")
		if e.typeflag == tar.TypeDir {
			name += "/"
		}
		h := &tar.Header{
			Typeflag: e.typeflag, Name: name, Linkname: e.linkname, Mode: e.mode,
			Uid: e.uid, Gid: e.gid, Size: int64(len(e.data)), ModTime: mtime, Format: tar.FormatPAX,
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("layer entry %s: %w", p, err)
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, fmt.Errorf("layer entry %s: %w", p, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Layer returns the tree as a gzip-compressed OCI layer.
func (t *Tree) Layer(mtime time.Time) (v1.Layer, error) {
	b, err := t.Tar(mtime)
	if err != nil {
		return nil, err
	}
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
}
