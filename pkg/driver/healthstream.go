package driver

import (
	"context"
	"time"

	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"github.com/rota-dev/rota/pkg/driver/resources"
)

// healthResend is well inside the kubelet's 30 s staleness window.
const healthResend = 10 * time.Second

// WatchHealthStatus implements kubeletplugin.DRAPlugin: a full report now, on
// every change, and every 10 s otherwise.
func (d *Driver) WatchHealthStatus(ctx context.Context, reports chan<- kubeletplugin.DeviceHealthReport) error {
	changes, stop := d.cfg.Monitor.Subscribe()
	defer stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case reports <- d.healthReport():
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changes:
		case <-d.cfg.Clock.After(healthResend):
		}
	}
}

func (d *Driver) healthReport() kubeletplugin.DeviceHealthReport {
	statuses := d.cfg.Monitor.Statuses()
	now := d.cfg.Clock.Now()
	var report kubeletplugin.DeviceHealthReport
	for _, g := range d.cfg.Inventory.GPUs {
		st := statuses[g.Index]
		h := kubeletplugin.HealthStatusHealthy
		if !st.IsHealthy() {
			h = kubeletplugin.HealthStatusUnhealthy
		}
		report.Devices = append(report.Devices, kubeletplugin.DeviceHealth{
			PoolName: d.cfg.NodeName, DeviceName: resources.DeviceName(g.Index),
			Health: h, LastUpdated: now, Message: st.Message,
		})
	}
	return report
}
