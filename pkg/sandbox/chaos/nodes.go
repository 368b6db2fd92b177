package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/klog/v2"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
	"k8s.io/utils/clock"

	"github.com/rota-dev/rota/pkg/driver/cdi"
	"github.com/rota-dev/rota/pkg/driver/checkpoint"
	"github.com/rota-dev/rota/pkg/driver/gpu"
	"github.com/rota-dev/rota/pkg/sandbox/cluster"
	"github.com/rota-dev/rota/pkg/sim/kubelet"
)

// node is one simulated GPU node: the driver as a process on a mock NVML
// profile, and the simulated kubelet (in the harness) calling it over its
// gRPC socket.
type node struct {
	spec    cluster.NodeSpec
	dir     string
	driver  *proc
	conn    *grpc.ClientConn
	kubelet *kubelet.Kubelet
	gpus    int

	faultsMu sync.Mutex
	faults   map[int]uint64
}

func (n *node) dataDir() string   { return filepath.Join(n.dir, "p") }
func (n *node) cdiDir() string    { return filepath.Join(n.dir, "cdi") }
func (n *node) faultFile() string { return filepath.Join(n.dir, "faults") }

// Kubelet timing: real time, short, so that pods come and go within the
// kills' rhythm.
const (
	kubeletStartDelay = 300 * time.Millisecond
	kubeletReadyDelay = 300 * time.Millisecond
	kubeletMaxGrace   = time.Second
)

func (r *runner) startNode(ctx context.Context, spec cluster.NodeSpec) (*node, error) {
	if err := r.c.RegisterNode(ctx, spec.Name); err != nil {
		return nil, fmt.Errorf("node %s: %w", spec.Name, err)
	}
	// Unix socket paths are limited to 108 bytes: keep the plugin's short.
	dir, err := os.MkdirTemp("/tmp", "rota-ch-")
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", spec.Name, err)
	}
	gpus, err := gpu.ParseProfile(spec.Profile)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", spec.Name, err)
	}
	n := &node{spec: spec, dir: dir, faults: map[int]uint64{}, gpus: len(gpus)}
	r.cleanups = append(r.cleanups, func() { _ = os.RemoveAll(dir) })
	bootID := filepath.Join(dir, "boot_id")
	if err := os.WriteFile(bootID, []byte("boot-1\n"), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(n.faultFile(), nil, 0o600); err != nil {
		return nil, err
	}
	args := []string{
		"--node-name=" + spec.Name, "--mock-profile=" + spec.Profile, "--mock-fault-file=" + n.faultFile(),
		"--cdi-root=" + n.cdiDir(), "--plugin-data-dir=" + n.dataDir(), "--registrar-dir=" + filepath.Join(dir, "r"),
		"--checkpoint-dir=" + n.dataDir(), "--boot-id-file=" + bootID, "--kubeconfig=" + r.c.Kubeconfig,
		"--http-address=", "--metrics-address=", "--health-probe-interval=100ms", "--xid-hold-time=-1s",
		"--shutdown-timeout=5s", "-v=2",
	}
	if spec.ConsumableMemory {
		args = append(args, "--consumable-memory")
	}
	n.driver = newProc("driver-"+spec.Name, KindDriver, filepath.Join(r.o.BinDir, "dra-kubelet-plugin"), r.logDir, args...)
	if err := n.driver.start(ctx); err != nil {
		return nil, err
	}
	// The kubelet redials a restarted plugin soon: gRPC's default back-off
	// grows to two minutes.
	n.conn, err = grpc.NewClient("unix://"+filepath.Join(n.dataDir(), "dra.sock"),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, MaxDelay: time.Second},
			MinConnectTimeout: time.Second,
		}))
	if err != nil {
		return nil, fmt.Errorf("node %s: dialing its plugin: %w", spec.Name, err)
	}
	r.cleanups = append(r.cleanups, func() { _ = n.conn.Close() })
	n.kubelet, err = kubelet.New(kubelet.Options{
		Client: r.c.Client, NodeName: spec.Name, Clock: clock.RealClock{},
		StartDelay: kubeletStartDelay, ReadyDelay: kubeletReadyDelay, MaxGracePeriod: kubeletMaxGrace,
		Preparer:   drapb.NewDRAPluginClient(n.conn),
		RetryDelay: 300 * time.Millisecond, MaxRetryDelay: 2 * time.Second,
	})
	if err != nil {
		return nil, err
	}
	kctx, cancel := context.WithCancel(klog.NewContext(ctx, klog.FromContext(ctx).WithValues("node", spec.Name)))
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := n.kubelet.Run(kctx); err != nil {
			klog.FromContext(ctx).Error(err, "Simulated kubelet failed", "node", spec.Name)
		}
	}()
	r.cleanups = append(r.cleanups, func() { cancel(); <-done })
	if err := r.c.WaitForSlice(ctx, spec.Name); err != nil {
		return nil, fmt.Errorf("node %s: the plugin did not publish its GPUs (log: %s): %w", spec.Name, n.driver.logPath, err)
	}
	return n, nil
}

// checkpoint reads the driver's checkpoint as it is on disk now.
func (n *node) checkpoint() (*checkpoint.Checkpoint, error) {
	store, err := checkpoint.NewStore(n.dataDir())
	if err != nil {
		return nil, err
	}
	return store.Load("boot-1")
}

// cdiClaims lists the claim UIDs that have a CDI spec on the node.
func (n *node) cdiClaims() ([]string, error) {
	w, err := cdi.NewWriter(n.cdiDir())
	if err != nil {
		return nil, err
	}
	return w.Claims()
}

// checkpointWriteInFlight tells whether a checkpoint write is under way: a
// temporary file written in the last second. Older ones are left over by
// drivers killed in mid-write (the driver does not remove them when it
// starts), and are not counted.
func (n *node) checkpointWriteInFlight() bool {
	entries, err := os.ReadDir(n.dataDir())
	if err != nil {
		return false
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), checkpoint.FileName+".tmp-") {
			continue
		}
		if info, err := e.Info(); err == nil && time.Since(info.ModTime()) < time.Second {
			return true
		}
	}
	return false
}

// setFault raises (xid > 0) or clears (xid 0) a fault on GPU index through
// the mock's fault file, which the plugin process polls.
func (n *node) setFault(index int, xid uint64) error {
	n.faultsMu.Lock()
	defer n.faultsMu.Unlock()
	if xid == 0 {
		delete(n.faults, index)
	} else {
		n.faults[index] = xid
	}
	var lines []string
	for i, x := range n.faults {
		lines = append(lines, fmt.Sprintf("%d %d", i, x))
	}
	sort.Strings(lines)
	tmp := n.faultFile() + ".tmp"
	if err := os.WriteFile(tmp, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, n.faultFile())
}
