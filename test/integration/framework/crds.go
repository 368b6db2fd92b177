package framework

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"
)

// InstallCRDs creates every CRD in manifests/crds and waits until each is
// established, so the test talks to exactly the schemas that are shipped.
func (cp *ControlPlane) InstallCRDs(tb testing.TB) {
	tb.Helper()
	files, err := filepath.Glob(filepath.Join(RepoRoot(tb), "manifests", "crds", "*.yaml"))
	if err != nil || len(files) == 0 {
		tb.Fatalf("no CRDs in manifests/crds (run 'make generate'): %v", err)
	}
	ctx := context.Background()
	crds := cp.Extensions.ApiextensionsV1().CustomResourceDefinitions()
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			tb.Fatalf("read %s: %v", file, err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(data, &crd); err != nil {
			tb.Fatalf("decode %s: %v", file, err)
		}
		if _, err := crds.Create(ctx, &crd, metav1.CreateOptions{}); err != nil {
			tb.Fatalf("create CRD %s: %v", crd.Name, err)
		}
		err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			got, err := crds.Get(ctx, crd.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			for _, c := range got.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			tb.Fatalf("CRD %s not established: %v", crd.Name, err)
		}
	}
}
