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

// InstallCRDsFrom creates every CRD in dir (a test's own fixtures, for
// example a third-party API Rota drives when it is installed) and waits until
// each is established.
func (cp *ControlPlane) InstallCRDsFrom(tb testing.TB, dir string) {
	tb.Helper()
	if err := cp.cp.InstallCRDs(context.Background(), dir); err != nil {
		tb.Fatal(err)
	}
}

// InstallCRDFiles creates the CRD of each file (absolute paths, for
// example a third-party API's CRD from its Go module) and waits until each
// is established.
func (cp *ControlPlane) InstallCRDFiles(tb testing.TB, files ...string) {
	tb.Helper()
	if err := cp.cp.InstallCRDFiles(context.Background(), files...); err != nil {
		tb.Fatal(err)
	}
}
