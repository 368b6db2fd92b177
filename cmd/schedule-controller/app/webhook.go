package app

import (
	"context"
	"fmt"
	"net"

	"k8s.io/client-go/dynamic"
	"k8s.io/klog/v2"

	"github.com/rota-dev/rota/pkg/schedule/targetguard"
)

// WebhookOptions say where the target webhook listens.
type WebhookOptions struct {
	// Address serves the webhook; empty serves none.
	Address string
	// CertDir holds tls.crt and tls.key (the Secret `webhook-certs` writes).
	CertDir string
}

// serveWebhook starts the target webhook of o, with its own DeploySchedule
// cache, on every replica (leader or not); it returns the address it
// listens on ("" when off). Both stop when ctx ends.
func serveWebhook(ctx context.Context, o WebhookOptions, dyn dynamic.Interface) (string, error) {
	if o.Address == "" {
		return "", nil
	}
	ln, err := net.Listen("tcp", o.Address)
	if err != nil {
		return "", fmt.Errorf("target webhook: listening on %s: %w", o.Address, err)
	}
	schedules := targetguard.NewInformer(dyn)
	go schedules.Run(ctx)
	go func() {
		if err := targetguard.Serve(ctx, ln, o.CertDir, targetguard.New(schedules)); err != nil {
			klog.FromContext(ctx).Error(err, "The target webhook stopped; the API server refuses the controller's writes until it is back")
		}
	}()
	return ln.Addr().String(), nil
}
