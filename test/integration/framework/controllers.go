package framework

import (
	"context"
	"testing"

	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/rota-dev/rota/pkg/sandbox/controlplane"
)

// StartClaimController runs kube-controller-manager's ResourceClaim controller,
// which creates a pod's claims from its ResourceClaimTemplates and releases
// them when pods go away. It stops before the control plane does.
func (cp *ControlPlane) StartClaimController(tb testing.TB) {
	tb.Helper()
	logger := ktesting.NewLogger(tb, ktesting.NewConfig(ktesting.Verbosity(2)))
	stop, err := controlplane.StartClaimController(klog.NewContext(context.Background(), logger), cp.Client)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(stop)
}
