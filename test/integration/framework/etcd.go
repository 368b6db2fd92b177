package framework

import (
	"fmt"
	"net/url"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// startEtcd runs etcd in-process on loopback ports chosen by the kernel and
// returns its client URL. It stops when the test ends.
func startEtcd(tb testing.TB) string {
	tb.Helper()
	cfg := embed.NewConfig()
	cfg.Dir = tb.TempDir()
	local := url.URL{Scheme: "http", Host: "127.0.0.1:0"}
	cfg.ListenClientUrls = []url.URL{local}
	cfg.AdvertiseClientUrls = []url.URL{local}
	cfg.ListenPeerUrls = []url.URL{local}
	cfg.AdvertisePeerUrls = []url.URL{local}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.LogLevel = "error"

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		tb.Fatalf("start embedded etcd: %v", err)
	}
	tb.Cleanup(e.Close)
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		tb.Fatalf("embedded etcd failed: %v", err)
	case <-time.After(30 * time.Second):
		tb.Fatal("embedded etcd not ready after 30s")
	}
	return fmt.Sprintf("http://%s", e.Clients[0].Addr().String())
}
