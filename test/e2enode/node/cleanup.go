package node

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// killShims SIGKILLs the containerd shims of this node (their command line
// names its containerd socket): a shim outlives containerd by design.
func killShims(socket string) error {
	pids, err := processesWithArg(socket)
	if err != nil {
		return err
	}
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if left, _ := processesWithArg(socket); len(left) == 0 {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	left, _ := processesWithArg(socket)
	return fmt.Errorf("shims still running after SIGKILL: %v", left)
}

// processesWithArg lists the processes one of whose arguments is arg.
func processesWithArg(arg string) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		for _, a := range bytes.Split(cmdline, []byte{0}) {
			if string(a) == arg {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids, nil
}

// mountsUnder lists the mount points at or below dir, deepest first.
func mountsUnder(dir string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var out []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 5 {
			continue
		}
		// The mount point, with spaces and the like octal-escaped.
		mp, err := strconv.Unquote(`"` + strings.ReplaceAll(fields[4], `"`, `\"`) + `"`)
		if err != nil {
			mp = fields[4]
		}
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out, s.Err()
}

// unmountUnder unmounts everything mounted at or below dir.
func unmountUnder(dir string) error {
	mps, err := mountsUnder(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, mp := range mps {
		if err := unix.Unmount(mp, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("umount %s: %w", mp, err))
		}
	}
	if left, _ := mountsUnder(dir); len(left) > 0 {
		errs = append(errs, fmt.Errorf("still mounted: %v", left))
	}
	return errors.Join(errs...)
}

// netnsDir is where containerd's CRI plugin pins pod network namespaces.
const netnsDir = "/var/run/netns"

func netnsNames() map[string]bool {
	names := map[string]bool{}
	entries, _ := os.ReadDir(netnsDir)
	for _, e := range entries {
		names[e.Name()] = true
	}
	return names
}

// removeNewNetns unpins and removes the network namespaces that appeared
// since the node started (a pod sandbox containerd did not tear down).
func removeNewNetns(before map[string]bool) error {
	var errs []error
	for name := range netnsNames() {
		if before[name] || !strings.HasPrefix(name, "cni-") {
			continue
		}
		path := filepath.Join(netnsDir, name)
		if err := unix.Unmount(path, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
			errs = append(errs, fmt.Errorf("umount %s: %w", path, err))
		}
		if err := os.Remove(path); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// hostPaths are directories outside Dir that containerd, runc or the CNI
// plugins create on first use: containerd's shim sockets (its state
// directory's s/ is fixed at /run/containerd/s), the pinned network
// namespaces, and the cgroup (k8s.io) containerd puts containers under in
// every hierarchy. Stop removes those that were not there before Start.
func hostPaths() []string {
	paths := []string{"/run/containerd", netnsDir}
	hierarchies, _ := filepath.Glob("/sys/fs/cgroup/*")
	for _, h := range hierarchies {
		if fi, err := os.Lstat(h); err == nil && fi.IsDir() {
			paths = append(paths, filepath.Join(h, "k8s.io"))
		}
	}
	return paths
}

// existing returns which of paths exist.
func existing(paths []string) map[string]bool {
	out := map[string]bool{}
	for _, p := range paths {
		if _, err := os.Stat(p); err == nil {
			out[p] = true
		}
	}
	return out
}

// removeNewHostPaths removes the host paths that did not exist before:
// directories bottom-up, only when empty (a cgroup is removed with rmdir
// once it has no processes and no children).
func removeNewHostPaths(before map[string]bool) error {
	var errs []error
	for _, p := range hostPaths() {
		if before[p] {
			continue
		}
		if _, err := os.Stat(p); err != nil {
			continue
		}
		if err := removeEmptyDirs(p); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// removeEmptyDirs removes dir and its subdirectories, deepest first, with
// rmdir: it fails on a directory that still holds a file (cgroup control
// files are an exception rmdir itself handles).
func removeEmptyDirs(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() {
			if err := removeEmptyDirs(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	if err := unix.Rmdir(dir); err != nil {
		return fmt.Errorf("rmdir %s: %w", dir, err)
	}
	return nil
}
