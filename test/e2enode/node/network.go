package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"k8s.io/klog/v2"
)

// bridgeName is the Linux bridge the CNI plugin attaches pods to.
const bridgeName = "rota-e2e0"

// writeCNIConfig gives containerd the bridge network: pods get an address
// of cfg.PodCIDR on the bridge, whose host side is the CIDR's first
// address and their default route. No masquerading: pods talk only to this
// host (the kube-apiserver forwarder), so no iptables rule is needed.
func (n *Node) writeCNIConfig() error {
	_, cidr, err := net.ParseCIDR(n.cfg.PodCIDR)
	if err != nil {
		return fmt.Errorf("pod CIDR %q: %w", n.cfg.PodCIDR, err)
	}
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       "rota-e2e",
		"plugins": []any{map[string]any{
			"type":             "bridge",
			"bridge":           bridgeName,
			"isDefaultGateway": true,
			"ipMasq":           false,
			"hairpinMode":      true,
			"ipam": map[string]any{
				"type":    "host-local",
				"dataDir": filepath.Join(n.cfg.Dir, "cni", "ipam"),
				"ranges":  [][]map[string]string{{{"subnet": cidr.String()}}},
			},
		}},
	}
	data, err := json.MarshalIndent(conf, "", "  ")
	if err != nil {
		return err
	}
	dir := filepath.Join(n.cfg.Dir, "cni", "net.d")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "10-rota-e2e.conflist"), data, 0o644)
}

// serviceProxy stands in for kube-proxy for the one Service pods use: the
// kubernetes Service's ClusterIP is put on the host's loopback device and a
// TCP forwarder on it passes connections to kube-apiserver. kube-apiserver's
// serving certificate names the ClusterIP, so in-cluster clients verify it
// unchanged.
type serviceProxy struct {
	addr     string // ip/32 on lo
	listener net.Listener
	wg       sync.WaitGroup
}

func startServiceProxy(ctx context.Context, serviceIP net.IP, port int, target string) (*serviceProxy, error) {
	if serviceIP == nil {
		return nil, errors.New("no service IP")
	}
	if ips, err := net.InterfaceAddrs(); err == nil {
		for _, a := range ips {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.Equal(serviceIP) {
				return nil, fmt.Errorf("%s is already an address of this machine: is another e2e node running?", serviceIP)
			}
		}
	}
	p := &serviceProxy{addr: serviceIP.String() + "/32"}
	if out, err := exec.CommandContext(ctx, "ip", "addr", "add", p.addr, "dev", "lo").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("ip addr add %s dev lo: %w: %s", p.addr, err, out)
	}
	l, err := net.Listen("tcp", net.JoinHostPort(serviceIP.String(), fmt.Sprint(port)))
	if err != nil {
		_ = p.removeAddress()
		return nil, err
	}
	p.listener = l
	logger := klog.FromContext(ctx)
	p.wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			p.wg.Go(func() { forward(logger, c, target) })
		}
	})
	return p, nil
}

func forward(logger klog.Logger, c net.Conn, target string) {
	defer func() { _ = c.Close() }()
	t, err := net.Dial("tcp", target)
	if err != nil {
		logger.Error(err, "Service proxy cannot reach kube-apiserver", "target", target)
		return
	}
	defer func() { _ = t.Close() }()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go pipe(t, c)
	go pipe(c, t)
	<-done
	<-done
}

func (p *serviceProxy) removeAddress() error {
	if out, err := exec.Command("ip", "addr", "del", p.addr, "dev", "lo").CombinedOutput(); err != nil {
		return fmt.Errorf("ip addr del %s dev lo: %w: %s", p.addr, err, out)
	}
	return nil
}

// stop closes the listener, ends open connections' forwarding once their
// peers close, and takes the address off lo.
func (p *serviceProxy) stop() error {
	_ = p.listener.Close()
	return p.removeAddress()
}

// removeBridge deletes the pods' bridge, if the CNI plugin made one.
func removeBridge() error {
	if _, err := net.InterfaceByName(bridgeName); err != nil {
		return nil
	}
	if out, err := exec.Command("ip", "link", "del", bridgeName).CombinedOutput(); err != nil && !strings.Contains(string(out), "Cannot find") {
		return fmt.Errorf("ip link del %s: %w: %s", bridgeName, err, out)
	}
	return nil
}
