// Package driver adapts the gpu.rota.dev state machine, discovery and health
// monitor to the kubelet through k8s.io/dynamic-resource-allocation/kubeletplugin.
package driver

import (
	"context"
	"errors"
	"fmt"
	"sync"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/driver/gpu"
	"github.com/rota-dev/rota/pkg/driver/health"
	"github.com/rota-dev/rota/pkg/driver/resources"
	"github.com/rota-dev/rota/pkg/driver/state"
)

var _ kubeletplugin.DRAPlugin = &Driver{}

// Config wires a Driver. Every part is built by the caller (main or a test).
type Config struct {
	NodeName  string
	Inventory *gpu.Inventory
	State     *state.State
	Monitor   *health.Monitor
	Metrics   *Metrics
	Clock     clock.Clock
	// Publish chooses how GPUs are published; its zero value publishes each
	// GPU for one claim at a time (see resources.Options.ConsumableMemory).
	Publish resources.Options
	// Fatal is called for background errors that retrying cannot fix; main
	// cancels its context with it so the plugin shuts down and restarts.
	Fatal func(error)
}

// Driver is the DRA plugin.
type Driver struct {
	cfg Config

	mu     sync.Mutex
	helper *kubeletplugin.Helper
}

// New returns a Driver; Start connects it to the kubelet.
func New(cfg Config) *Driver { return &Driver{cfg: cfg} }

// Start registers with the kubelet, publishes the node's GPUs and republishes
// whenever their health changes, until ctx ends.
func (d *Driver) Start(ctx context.Context, opts ...kubeletplugin.Option) (*kubeletplugin.Helper, error) {
	opts = append([]kubeletplugin.Option{
		kubeletplugin.DriverName(gpuv1.DriverName),
		kubeletplugin.NodeName(d.cfg.NodeName),
		// The state machine orders concurrent calls itself (its mutex and
		// the node-wide checkpoint lock) and batches them; the helper's
		// one-call-at-a-time lock would leave nothing to batch.
		kubeletplugin.Serialize(false),
	}, opts...)
	helper, err := kubeletplugin.Start(ctx, d, opts...)
	if err != nil {
		return nil, fmt.Errorf("starting kubelet plugin: %w", err)
	}
	d.mu.Lock()
	d.helper = helper
	d.mu.Unlock()
	changes, stop := d.cfg.Monitor.Subscribe()
	if err := d.publish(ctx); err != nil {
		stop()
		helper.Stop()
		return nil, err
	}
	go func() {
		defer stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-changes:
				if err := d.publish(ctx); err != nil {
					klog.FromContext(ctx).Error(err, "Republishing ResourceSlice after a health change")
				}
			}
		}
	}()
	return helper, nil
}

// publish hands the current devices to the helper's slice controller, which
// writes only when the content differs from what is in the API server.
func (d *Driver) publish(ctx context.Context) error {
	statuses := d.cfg.Monitor.Statuses()
	d.cfg.Metrics.setDevices(statuses)
	res, err := resources.ForNode(d.cfg.NodeName, d.cfg.Inventory, statuses, d.cfg.Publish)
	if err != nil {
		return err
	}
	d.mu.Lock()
	helper := d.helper
	d.mu.Unlock()
	if err := helper.PublishResources(ctx, res); err != nil {
		return fmt.Errorf("publishing ResourceSlice: %w", err)
	}
	return nil
}

// PrepareResourceClaims implements kubeletplugin.DRAPlugin. Each claim
// succeeds or fails on its own. The claims of one call, and those of calls
// made at the same time, share checkpoint writes (state.PrepareAll).
func (d *Driver) PrepareResourceClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	start := d.cfg.Clock.Now()
	results := d.cfg.State.PrepareAll(ctx, claims)
	took := d.cfg.Clock.Since(start)
	out := make(map[types.UID]kubeletplugin.PrepareResult, len(claims))
	for i, c := range claims {
		r := results[i]
		d.cfg.Metrics.observePrepare(took, r.Err)
		if r.Err != nil {
			klog.FromContext(ctx).Error(r.Err, "Preparing claim failed", "claim", klog.KObj(c))
			out[c.UID] = kubeletplugin.PrepareResult{Err: fmt.Errorf("preparing claim %s/%s: %w", c.Namespace, c.Name, r.Err)}
			continue
		}
		out[c.UID] = kubeletplugin.PrepareResult{Devices: r.Devices}
	}
	return out, nil
}

// UnprepareResourceClaims implements kubeletplugin.DRAPlugin.
func (d *Driver) UnprepareResourceClaims(ctx context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	refs := make([]state.ClaimRef, len(claims))
	for i, c := range claims {
		refs[i] = state.ClaimRef{UID: string(c.UID), Namespace: c.Namespace, Name: c.Name}
	}
	start := d.cfg.Clock.Now()
	errs := d.cfg.State.UnprepareAll(ctx, refs)
	took := d.cfg.Clock.Since(start)
	out := make(map[types.UID]error, len(claims))
	for i, c := range claims {
		d.cfg.Metrics.observeUnprepare(took, errs[i])
		out[c.UID] = errs[i]
	}
	return out, nil
}

// HandleError implements kubeletplugin.DRAPlugin: recoverable errors are
// logged, the others shut the plugin down so that it restarts clean.
func (d *Driver) HandleError(ctx context.Context, err error, msg string) {
	utilruntime.HandleErrorWithContext(ctx, err, msg)
	if !errors.Is(err, kubeletplugin.ErrRecoverable) && d.cfg.Fatal != nil {
		d.cfg.Fatal(fmt.Errorf("%s: %w", msg, err))
	}
}
