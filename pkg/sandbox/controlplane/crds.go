package controlplane

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"
)

// InstallCRDs creates every CRD in dir (manifests/crds; its
// kustomization.yaml is not a CRD) and waits until each is established.
func (cp *ControlPlane) InstallCRDs(ctx context.Context, dir string) error {
	all, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return fmt.Errorf("listing CRDs: %w", err)
	}
	var files []string
	for _, f := range all {
		if filepath.Base(f) != "kustomization.yaml" {
			files = append(files, f)
		}
	}
	if len(files) == 0 {
		return fmt.Errorf("no CRDs in %s (run 'make generate')", dir)
	}
	return cp.InstallCRDFiles(ctx, files...)
}

// InstallCRDFiles creates the CRD of each file, in order, and waits until
// each is established and served by discovery.
func (cp *ControlPlane) InstallCRDFiles(ctx context.Context, files ...string) error {
	crds := cp.Extensions.ApiextensionsV1().CustomResourceDefinitions()
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			return fmt.Errorf("read CRD: %w", err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(data, &crd); err != nil {
			return fmt.Errorf("decode %s: %w", file, err)
		}
		if _, err := crds.Create(ctx, &crd, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create CRD %s: %w", crd.Name, err)
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
			return fmt.Errorf("CRD %s not established: %w", crd.Name, err)
		}
		if err := cp.waitDiscovered(ctx, &crd); err != nil {
			return err
		}
	}
	return nil
}

// waitDiscovered waits until discovery lists the CRD's resource in every
// served version. Established comes first: the apiserver updates its
// discovery document afterwards, on its own goroutine, and a client that
// reads discovery in between (a REST mapper) finds no such kind.
func (cp *ControlPlane) waitDiscovered(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) error {
	dc := cp.Extensions.Discovery()
	for _, v := range crd.Spec.Versions {
		if !v.Served {
			continue
		}
		gv := crd.Spec.Group + "/" + v.Name
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			list, err := dc.ServerResourcesForGroupVersion(gv)
			if err != nil {
				return false, nil // not served yet: a 404 until the group appears
			}
			for _, r := range list.APIResources {
				if r.Name == crd.Spec.Names.Plural {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("CRD %s: %s not in discovery: %w", crd.Name, gv, err)
		}
	}
	return nil
}
