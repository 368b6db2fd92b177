package security

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/gpuquota"
	"github.com/rota-dev/rota/test/integration/framework"
)

// TestGPUQuotaIsTheClusterAdmins: issue #41 point 6. A tenant's guarantee
// is a cluster-scoped GPUQuota named after its namespace, so the namespace's
// admin (ClusterRole admin, with what the install aggregates into it) cannot
// create, raise, patch, delete or write the status of one, its own or
// another's. The schedule controller's token may write the status (the
// GPUQuota status controller) but not raise a guarantee.
func TestGPUQuotaIsTheClusterAdmins(t *testing.T) {
	e := setup(t)
	l := newLedger(t)
	ctx := context.Background()
	e.cp.ApplyManifests(t, "manifests/schedule-controller/rbac.yaml", "manifests/schedule-controller/tenant-rbac.yaml")
	aliceDyn, err := dynamic.NewForConfig(e.cp.ImpersonateUser(alice))
	if err != nil {
		t.Fatal(err)
	}
	saDyn, err := dynamic.NewForConfig(e.cp.ImpersonateServiceAccount(controllerNS, controllerSA))
	if err != nil {
		t.Fatal(err)
	}
	// The install's tenant roles are aggregated into admin: alice holds
	// them once she may write DeploySchedules.
	framework.WaitFor(t, "the install's tenant roles to reach admin", func(ctx context.Context) (bool, string, error) {
		_, err := aliceDyn.Resource(rotav1.SchemeGroupVersion.WithResource("deployschedules")).Namespace(teamA).List(ctx, metav1.ListOptions{})
		return err == nil, "listing DeploySchedules: " + errString(err), nil
	})
	quota := func(name string, guaranteed int32) *rotav1.GPUQuota {
		return &rotav1.GPUQuota{
			TypeMeta:   metav1.TypeMeta{APIVersion: rotav1.SchemeGroupVersion.String(), Kind: "GPUQuota"},
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       rotav1.GPUQuotaSpec{Models: []rotav1.ModelQuota{{Model: "H100", Guaranteed: guaranteed}}},
		}
	}
	create := func(ctx context.Context, dyn dynamic.Interface, q *rotav1.GPUQuota) error {
		u, err := gpuquota.ToUnstructured(q)
		if err != nil {
			return err
		}
		_, err = dyn.Resource(rotav1.GPUQuotasResource).Create(ctx, u, metav1.CreateOptions{})
		return err
	}
	// raised is the cluster admin's GPUQuota name with its guarantee set to
	// guaranteed, ready to send.
	raised := func(t *testing.T, name string, guaranteed int32) *rotav1.GPUQuota {
		t.Helper()
		u, err := e.cp.Dynamic.Resource(rotav1.GPUQuotasResource).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		q, err := gpuquota.FromObject(u)
		if err != nil {
			t.Fatal(err)
		}
		q.Spec.Models[0].Guaranteed = guaranteed
		return q
	}
	update := func(ctx context.Context, dyn dynamic.Interface, q *rotav1.GPUQuota) error {
		u, err := gpuquota.ToUnstructured(q)
		if err != nil {
			return err
		}
		_, err = dyn.Resource(rotav1.GPUQuotasResource).Update(ctx, u, metav1.UpdateOptions{})
		return err
	}

	l.hostile(t, "tenant creates the GPUQuota of its own namespace", func(ctx context.Context) error {
		return create(ctx, aliceDyn, quota(teamA, 16))
	}, "forbidden", `cannot create resource "gpuquotas"`)
	if err := create(ctx, e.cp.Dynamic, quota(teamA, 2)); err != nil {
		t.Fatal(err)
	}
	if err := create(ctx, e.cp.Dynamic, quota(teamB, 4)); err != nil {
		t.Fatal(err)
	}
	l.hostile(t, "tenant raises its own guarantee", func(ctx context.Context) error {
		return update(ctx, aliceDyn, raised(t, teamA, 16))
	}, "forbidden", `cannot update resource "gpuquotas"`)
	l.hostile(t, "tenant patches its own guarantee", func(ctx context.Context) error {
		_, err := aliceDyn.Resource(rotav1.GPUQuotasResource).Patch(ctx, teamA, types.JSONPatchType,
			[]byte(`[{"op":"replace","path":"/spec/models/0/guaranteed","value":16}]`), metav1.PatchOptions{})
		return err
	}, "forbidden", `cannot patch resource "gpuquotas"`)
	l.hostile(t, "tenant writes its GPUQuota's status", func(ctx context.Context) error {
		q := raised(t, teamA, 2)
		q.Status.Models = []rotav1.ModelQuotaStatus{{Model: "H100", Guaranteed: 2}}
		u, err := gpuquota.ToUnstructured(q)
		if err != nil {
			return err
		}
		_, err = aliceDyn.Resource(rotav1.GPUQuotasResource).UpdateStatus(ctx, u, metav1.UpdateOptions{})
		return err
	}, "forbidden", `cannot update resource "gpuquotas/status"`)
	l.hostile(t, "tenant deletes another tenant's GPUQuota", func(ctx context.Context) error {
		return aliceDyn.Resource(rotav1.GPUQuotasResource).Delete(ctx, teamB, metav1.DeleteOptions{})
	}, "forbidden", `cannot delete resource "gpuquotas"`)
	l.hostile(t, "schedule controller token raises a guarantee", func(ctx context.Context) error {
		return update(ctx, saDyn, raised(t, teamA, 16))
	}, "forbidden", `cannot update resource "gpuquotas"`)

	// Tenants do not read GPUQuotas either: a namespace's roles grant
	// nothing on cluster-scoped objects (docs/security.md).
	if _, err := aliceDyn.Resource(rotav1.GPUQuotasResource).Get(ctx, teamA, metav1.GetOptions{}); err == nil {
		t.Error("alice reads the GPUQuota of her namespace; docs/security.md says tenants do not")
	}
	// The controller's token writes the status, and nothing moved.
	q := raised(t, teamA, 2)
	q.Status.Models = []rotav1.ModelQuotaStatus{{Model: "H100", Guaranteed: 2}}
	u, err := gpuquota.ToUnstructured(q)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := saDyn.Resource(rotav1.GPUQuotasResource).UpdateStatus(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("the schedule controller's token cannot write GPUQuota status: %v", err)
	}
	for name, want := range map[string]int32{teamA: 2, teamB: 4} {
		u, err := e.cp.Dynamic.Resource(rotav1.GPUQuotasResource).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		q, err := gpuquota.FromObject(u)
		if err != nil {
			t.Fatal(err)
		}
		if q.Generation != 1 || q.Spec.Models[0].Guaranteed != want {
			t.Errorf("GPUQuota %s: generation %d, guarantees %d; want generation 1, %d", name, q.Generation, q.Spec.Models[0].Guaranteed, want)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return "allowed"
	}
	return err.Error()
}
