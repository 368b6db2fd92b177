package node

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/template"
	"time"
)

// PauseImage is the sandbox image containerd runs for every pod; Start's
// caller imports an image of that name (there is no registry to pull from).
const PauseImage = "registry.k8s.io/pause:3.10.2"

// criNamespace is the containerd namespace of the CRI plugin's containers
// and images.
const criNamespace = "k8s.io"

// containerdConfig is containerd's configuration (format version 3, which
// containerd 2 reads): every path under the node's directory, CDI specs
// from the driver's directory, runc from the tools directory, the bridge
// CNI plugin, and no attempt to lower the OOM score (this machine's root
// may not: restrict_oom_score_adj).
var containerdConfig = template.Must(template.New("containerd").Parse(`version = 3
root = '{{.Dir}}/containerd/root'
state = '{{.Dir}}/containerd/state'

[grpc]
  address = '{{.Socket}}'

[ttrpc]
  address = '{{.Socket}}.ttrpc'

[debug]
  address = ''

[plugins]
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = 'overlayfs'
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = '{{.PauseImage}}'

  [plugins.'io.containerd.cri.v1.runtime']
    restrict_oom_score_adj = true
    enable_cdi = true
    cdi_spec_dirs = ['{{.CDIDir}}']
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = 'runc'
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = 'io.containerd.runc.v2'
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          BinaryName = '{{.Tools}}/runc'
          Root = '{{.Dir}}/runc'
          SystemdCgroup = false
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = ['{{.Tools}}/cni']
      conf_dir = '{{.Dir}}/cni/net.d'
      use_internal_loopback = true

  [plugins.'io.containerd.grpc.v1.cri']
    stream_server_address = '127.0.0.1'

  [plugins.'io.containerd.internal.v1.opt']
    path = '{{.Dir}}/containerd/opt'
`))

// startContainerd writes the configuration and runs containerd until its
// socket answers.
func (n *Node) startContainerd(ctx context.Context) error {
	var buf bytes.Buffer
	if err := containerdConfig.Execute(&buf, map[string]string{
		"Dir": n.cfg.Dir, "Socket": n.containerdSocket(), "Tools": n.cfg.Tools,
		"CDIDir": n.CDIDir(), "PauseImage": PauseImage,
	}); err != nil {
		return err
	}
	file := filepath.Join(n.cfg.Dir, "containerd", "config.toml")
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(file, buf.Bytes(), 0o600); err != nil {
		return err
	}
	// The shim is found on PATH; runc is named in the configuration.
	env := []string{"PATH=" + n.cfg.Tools + ":" + os.Getenv("PATH")}
	p, err := startProcess(ctx, n.logDir(), "containerd", env, filepath.Join(n.cfg.Tools, "containerd"), "--config", file)
	if err != nil {
		return err
	}
	n.containerd = p
	return waitForSocket(ctx, p, n.containerdSocket(), time.Minute)
}

func (n *Node) containerdSocket() string {
	return filepath.Join(n.cfg.Dir, "containerd", "containerd.sock")
}

// ctr runs containerd's client in the CRI namespace.
func (n *Node) ctr(ctx context.Context, args ...string) (string, error) {
	args = append([]string{"--address", n.containerdSocket(), "--namespace", criNamespace}, args...)
	out, err := exec.CommandContext(ctx, filepath.Join(n.cfg.Tools, "ctr"), args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("ctr %s: %w: %s", strings.Join(args[4:], " "), err, out)
	}
	return string(out), nil
}

// ImportImage loads an image archive (docker-archive or OCI layout tar)
// into the node's image store, as a registry pull would.
func (n *Node) ImportImage(ctx context.Context, archive string) error {
	_, err := n.ctr(ctx, "images", "import", archive)
	return err
}

// killContainers SIGKILLs every task the runtime still runs and deletes
// them, so that nothing outlives containerd.
func (n *Node) killContainers(ctx context.Context) error {
	out, err := n.ctr(ctx, "tasks", "list", "--quiet")
	if err != nil {
		return err
	}
	var errs []error
	for _, id := range strings.Fields(out) {
		if _, err := n.ctr(ctx, "tasks", "kill", "--signal", "SIGKILL", id); err != nil && !strings.Contains(err.Error(), "not found") {
			errs = append(errs, err)
		}
	}
	for _, id := range strings.Fields(out) {
		deadline := time.Now().Add(10 * time.Second)
		for {
			_, err := n.ctr(ctx, "tasks", "delete", id)
			if err == nil || strings.Contains(err.Error(), "not found") {
				break
			}
			if time.Now().After(deadline) {
				errs = append(errs, err)
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("stopping containers: %v", errs)
	}
	return nil
}
