package oci

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// ParseLdd returns the absolute paths of the shared objects in ldd's
// output: each "name => /path (addr)" and the dynamic loader's own line.
// A library ldd could not find is an error; the vDSO, which has no file,
// is skipped.
func ParseLdd(out []byte) ([]string, error) {
	var paths []string
	var missing []string
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		if name, rest, ok := strings.Cut(line, "=>"); ok {
			f := strings.Fields(rest)
			if len(f) == 0 || f[0] == "not" {
				missing = append(missing, strings.TrimSpace(name))
				continue
			}
			if strings.HasPrefix(f[0], "/") {
				paths = append(paths, f[0])
			}
			continue
		}
		if f := strings.Fields(line); strings.HasPrefix(f[0], "/") {
			paths = append(paths, f[0])
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("ldd found no file for %s", strings.Join(missing, ", "))
	}
	if len(paths) == 0 {
		return nil, errors.New("ldd listed no shared object: is the binary dynamically linked?")
	}
	return paths, nil
}

// CopyHostPath adds the file p of the directory tree at root (the build
// machine's "/") to the layer at the same path, and every symbolic link on
// the way as a link, so that /lib64/ld-linux-x86-64.so.2 on a merged-/usr
// system arrives as the links /lib64 -> usr/lib64 and
// /usr/lib64/ld-linux-x86-64.so.2 -> /lib/x86_64-linux-gnu/..., and the file
// they end at.
func (t *Tree) CopyHostPath(root, p string) error {
	if err := t.copyHostPath(root, p, 0); err != nil {
		return err
	}
	t.hostFiles = append(t.hostFiles, p)
	return nil
}

// HostFiles are the build machine's files the tree took (CopyHostPath's
// arguments, before links are followed), in the order they were added.
func (t *Tree) HostFiles() []string { return t.hostFiles }

func (t *Tree) copyHostPath(root, p string, links int) error {
	if links > 40 {
		return fmt.Errorf("%s: too many levels of symbolic links", p)
	}
	p, err := clean(p)
	if err != nil {
		return err
	}
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	cur := "/"
	for i, part := range parts {
		next := path.Join(cur, part)
		last := i == len(parts)-1
		fi, err := os.Lstat(filepath.Join(root, next))
		if err != nil {
			return fmt.Errorf("copying %s from the build machine: %w", p, err)
		}
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(filepath.Join(root, next))
			if err != nil {
				return err
			}
			if err := t.Symlink(next, target); err != nil {
				return err
			}
			resolved := target
			if !path.IsAbs(target) {
				resolved = path.Join(path.Dir(next), target)
			}
			return t.copyHostPath(root, path.Join(append([]string{resolved}, parts[i+1:]...)...), links+1)
		case fi.IsDir():
			if _, ok := t.entries[next]; !ok || last {
				if err := t.Dir(next, int64(fi.Mode().Perm()), 0, 0); err != nil {
					return err
				}
			}
			cur = next
		case fi.Mode().IsRegular():
			if !last {
				return fmt.Errorf("copying %s from the build machine: %s is not a directory", p, next)
			}
			data, err := os.ReadFile(filepath.Join(root, next))
			if err != nil {
				return err
			}
			return t.File(next, int64(fi.Mode().Perm()), data)
		default:
			return fmt.Errorf("copying %s from the build machine: %s is neither a file, a directory nor a link", p, next)
		}
	}
	return nil
}
