package poolreport

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rota-dev/rota/pkg/usage"
)

// TestTenants: the summary charges a reservation's GPU once to its
// namespace, its members adding nothing, and other GPUs to the namespaces
// holding them.
func TestTenants(t *testing.T) {
	rows := []GPU{
		{Model: "H200", Reservation: "serving/h200-pool", Tenants: []string{"serving"}},
		{Model: "H200", Reservation: "serving/h200-pool"},
		{Model: "H200", Tenants: []string{"serving", "batch"}},
		{Model: "H100"},
	}
	want := []Tenant{
		{Key: usage.Key{Namespace: "batch", Model: "H200"}, Holding: usage.Holding{Charged: 1}},
		{Key: usage.Key{Namespace: "serving", Model: "H200"}, Holding: usage.Holding{Reserved: 2, Charged: 3}},
	}
	got := Tenants(rows)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Tenants (-want +got):\n%s", diff)
	}
	var out bytes.Buffer
	if err := WriteTenants(&out, got); err != nil {
		t.Fatal(err)
	}
	wantText := "TENANT   MODEL  RESERVED  CHARGED\n" +
		"batch    H200   0         1\n" +
		"serving  H200   2         3\n"
	if diff := cmp.Diff(wantText, out.String()); diff != "" {
		t.Errorf("WriteTenants (-want +got):\n%s", diff)
	}
}
