package node

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/template"
	"time"
)

// kubeletConfig is the KubeletConfiguration: its state, pod logs and
// plugin directories under the node's directory; cgroupfs on cgroup v1
// (failCgroupV1: false), no per-QoS cgroups (nothing is left under the
// cgroup roots when the node goes), no eviction or image GC (the images
// came from no registry and cannot be pulled again); its API served on
// loopback to anyone (the tests read its metrics).
var kubeletConfig = template.Must(template.New("kubelet").Parse(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: {{.Port}}
readOnlyPort: 0
healthzPort: 0
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization:
  mode: AlwaysAllow
containerRuntimeEndpoint: unix://{{.Socket}}
podLogsDir: {{.Dir}}/pod-logs
staticPodPath: ""
failCgroupV1: false
failSwapOn: false
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
localStorageCapacityIsolation: false
evictionHard: {}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
nodeStatusUpdateFrequency: 2s
syncFrequency: 5s
fileCheckFrequency: 5s
resolvConf: /etc/resolv.conf
`))

// startKubelet runs the kubelet against containerd and kube-apiserver.
func (n *Node) startKubelet(ctx context.Context) error {
	dir := filepath.Join(n.cfg.Dir, "kubelet")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(n.cfg.Dir, "pod-logs"), 0o755); err != nil {
		return err
	}
	file := filepath.Join(n.cfg.Dir, "kubelet-config.yaml")
	var buf strings.Builder
	if err := kubeletConfig.Execute(&buf, map[string]any{"Port": n.cfg.KubeletPort, "Socket": n.containerdSocket(), "Dir": n.cfg.Dir}); err != nil {
		return err
	}
	if err := os.WriteFile(file, []byte(buf.String()), 0o600); err != nil {
		return err
	}
	labels := make([]string, 0, len(n.cfg.Labels))
	for k, v := range n.cfg.Labels {
		labels = append(labels, k+"="+v)
	}
	sort.Strings(labels)
	args := []string{
		"--config=" + file,
		"--kubeconfig=" + n.cfg.Kubeconfig,
		"--root-dir=" + n.KubeletDir(),
		"--cert-dir=" + filepath.Join(n.cfg.Dir, "kubelet-pki"),
		"--hostname-override=" + n.cfg.Name,
		"--node-ip=127.0.0.1",
		"--node-labels=" + strings.Join(labels, ","),
		"--v=" + fmt.Sprint(n.cfg.KubeletVerbosity),
	}
	p, err := startProcess(ctx, n.logDir(), "kubelet", nil, filepath.Join(n.cfg.Tools, "kubelet"), args...)
	if err != nil {
		return err
	}
	n.kubelet = p
	return nil
}

// KubeletDir is the kubelet's --root-dir.
func (n *Node) KubeletDir() string { return filepath.Join(n.cfg.Dir, "kubelet") }

// StopKubelet stops the kubelet (SIGTERM); running containers stay.
func (n *Node) StopKubelet() error {
	if n.kubelet == nil {
		return nil
	}
	return n.kubelet.stop(30 * time.Second)
}

// RestartKubelet stops the kubelet and starts it again, as a node's
// service manager does after an upgrade or a crash.
func (n *Node) RestartKubelet(ctx context.Context) error {
	if err := n.StopKubelet(); err != nil {
		return err
	}
	return n.startKubelet(ctx)
}

// KubeletMetrics returns the kubelet's /metrics text.
func (n *Node) KubeletMetrics(ctx context.Context) (string, error) {
	// The kubelet serves a self-signed certificate on loopback.
	tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // the kubelet's own self-signed certificate on loopback
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d/metrics", n.cfg.KubeletPort), nil)
	if err != nil {
		return "", err
	}
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return "", fmt.Errorf("kubelet metrics: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", fmt.Errorf("kubelet metrics: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("kubelet metrics: %s", resp.Status)
	}
	return string(data), nil
}

// PodLogDir is the kubelet's log directory of a pod: <container>/<run>.log.
func (n *Node) PodLogDir(namespace, pod, uid string) string {
	return filepath.Join(n.cfg.Dir, "pod-logs", namespace+"_"+pod+"_"+uid)
}

// ContainerLog returns what a pod's container printed (its first run), from
// the kubelet's pod log directory.
func (n *Node) ContainerLog(namespace, pod, uid, container string) (string, error) {
	data, err := os.ReadFile(filepath.Join(n.PodLogDir(namespace, pod, uid), container, "0.log"))
	if err != nil {
		return "", err
	}
	// CRI log lines: "<time> <stream> <F|P> <text>".
	var out strings.Builder
	for _, line := range strings.Split(strings.TrimRight(string(data), "\n"), "\n") {
		if f := strings.SplitN(line, " ", 4); len(f) == 4 {
			out.WriteString(f[3])
			if f[2] == "F" {
				out.WriteString("\n")
			}
		}
	}
	return out.String(), nil
}
