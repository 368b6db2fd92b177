package framework

import (
	"context"
	"path/filepath"
	"testing"
)

// InstallCRDs creates every CRD in manifests/crds and waits until each is
// established, so the test talks to exactly the schemas that are shipped.
func (cp *ControlPlane) InstallCRDs(tb testing.TB) {
	tb.Helper()
	if err := cp.cp.InstallCRDs(context.Background(), filepath.Join(RepoRoot(tb), "manifests", "crds")); err != nil {
		tb.Fatal(err)
	}
}
