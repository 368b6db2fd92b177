package controlplane

import (
	"fmt"
	"net/url"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// startEtcd runs etcd in-process in dir on loopback ports chosen by the
// kernel. It returns the client URL and a function that stops etcd. Quiet
// drops etcd's own log (errors only otherwise), which it writes to stderr.
func startEtcd(dir string, quiet bool) (string, func(), error) {
	cfg := embed.NewConfig()
	cfg.Dir = dir
	local := url.URL{Scheme: "http", Host: "127.0.0.1:0"}
	cfg.ListenClientUrls = []url.URL{local}
	cfg.AdvertiseClientUrls = []url.URL{local}
	cfg.ListenPeerUrls = []url.URL{local}
	cfg.AdvertisePeerUrls = []url.URL{local}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.LogLevel = "error"
	if quiet {
		cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	}

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return "", nil, fmt.Errorf("start embedded etcd: %w", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return "", nil, fmt.Errorf("embedded etcd failed: %w", err)
	case <-time.After(30 * time.Second):
		e.Close()
		return "", nil, fmt.Errorf("embedded etcd not ready after 30s")
	}
	return fmt.Sprintf("http://%s", e.Clients[0].Addr().String()), e.Close, nil
}
