package poolreport

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/gpuquota"
)

func h100s(node string, n int, tenant string) []GPU {
	out := make([]GPU, n)
	for i := range out {
		out[i] = GPU{Node: node, Device: fmt.Sprintf("gpu-%d", i), Model: "H100", Health: "Healthy"}
		if tenant != "" {
			out[i].Tenants = []string{tenant}
		}
	}
	return out
}

// TestPoolOf: an unhealthy GPU is not capacity; a GPU time-sliced by two
// tenants is used by both; a reservation's healthy GPU is its namespace's.
func TestPoolOf(t *testing.T) {
	rows := []GPU{
		{Model: "H100", Health: "Unhealthy(gpu.rota.dev/unhealthy xid-79)", Reservation: "serving/r"},
		{Model: "H100", Health: "Healthy", Reservation: "serving/r", Tenants: []string{"serving"}},
		{Model: "H200", Health: "Healthy", Tenants: []string{"batch", "serving"}},
		{Health: "Healthy", Tenants: []string{"batch"}},
	}
	want := gpuquota.Pool{
		Healthy:  map[string]int{"H100": 1, "H200": 1},
		Used:     map[string]map[string]int{"serving": {"H100": 1, "H200": 1}, "batch": {"H200": 1}},
		Reserved: map[string]map[string]int{"serving": {"H100": 1}},
	}
	if diff := cmp.Diff(want, PoolOf(rows)); diff != "" {
		t.Errorf("PoolOf (-want +got):\n%s", diff)
	}
}

// TestGuarantees: the scenario as `kubectl rota pool` prints it.
// team-a's numbers come from its status (current generation), team-b's
// are computed (its status is a generation behind); the fit line is per
// model; an invalid GPUQuota is named, not counted.
func TestGuarantees(t *testing.T) {
	rows := append(h100s("hgx-0", 8, "team-b"), h100s("hgx-1", 8, "team-b")...)
	rows = append(rows, GPU{Node: "hgx-2", Device: "gpu-0", Model: "H100", Health: "Unhealthy(gpu.rota.dev/unhealthy xid-79)"})
	quota := func(name string, gen, observed int64, models ...rotav1.ModelQuota) *rotav1.GPUQuota {
		return &rotav1.GPUQuota{ObjectMeta: metav1.ObjectMeta{Name: name, Generation: gen}, Spec: rotav1.GPUQuotaSpec{Models: models},
			Status: rotav1.GPUQuotaStatus{ObservedGeneration: observed}}
	}
	a := quota("team-a", 1, 1, rotav1.ModelQuota{Model: "H100", Guaranteed: 8})
	a.Status.Models = []rotav1.ModelQuotaStatus{{Model: "H100", Guaranteed: 8, Lent: 8}}
	b := quota("team-b", 2, 1, rotav1.ModelQuota{Model: "H100", Guaranteed: 8})
	b.Status.Models = []rotav1.ModelQuotaStatus{{Model: "H100", Guaranteed: 4, Used: 3}}
	c := quota("team-c", 1, 0, rotav1.ModelQuota{Model: "H100", Guaranteed: 1, LendingLimit: ptr.To[int32](2)})

	g := GuaranteesOf([]*rotav1.GPUQuota{c, b, a}, rows)
	want := []Guarantee{
		{Namespace: "team-a", Model: "H100", Guaranteed: 8, Lent: 8, FromStatus: true},
		{Namespace: "team-b", Model: "H100", Guaranteed: 8, Used: 16, Borrowed: 8},
	}
	if diff := cmp.Diff(want, g.Tenants); diff != "" {
		t.Errorf("tenants (-want +got):\n%s", diff)
	}
	var out bytes.Buffer
	if err := WriteGuarantees(&out, g); err != nil {
		t.Fatal(err)
	}
	wantText := "TENANT  MODEL  GUARANTEED  USED  BORROWED  LENT\n" +
		"team-a  H100   8           0     0         8\n" +
		"team-b  H100   8           16    8         0\n" +
		"H100: guarantees 16 (team-a 8, team-b 8) fit the 16 healthy GPUs\n" +
		"GPUQuota team-c is invalid and not applied: spec.models[0].lendingLimit: Invalid value: 2: cannot exceed guaranteed: a tenant lends only what it is guaranteed\n"
	if diff := cmp.Diff(wantText, out.String()); diff != "" {
		t.Errorf("WriteGuarantees (-want +got):\n%s", diff)
	}

	// Raised past the pool: the fit line says by how much.
	a2 := quota("team-a", 2, 1, rotav1.ModelQuota{Model: "H100", Guaranteed: 12})
	g = GuaranteesOf([]*rotav1.GPUQuota{a2, b}, rows)
	if diff := cmp.Diff([]string{"H100: guarantees 20 (team-a 12, team-b 8) exceed the 16 healthy GPUs by 4"}, g.Fit); diff != "" {
		t.Errorf("fit (-want +got):\n%s", diff)
	}
}
