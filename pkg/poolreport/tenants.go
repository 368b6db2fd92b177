package poolreport

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/usage"
)

// Tenant is one tenant's (namespace's) holding of one model, as the usage
// counters charge it (pkg/usage): GPUs its reservations hold, and GPUs
// charged to it (those, plus the other GPUs its claims are allocated).
type Tenant struct {
	usage.Key     `json:",inline"`
	usage.Holding `json:",inline"`
}

// Tenants applies the usage charge rule to the rows, sorted by namespace
// and model.
func Tenants(rows []GPU) []Tenant {
	gpus := make([]usage.GPU, 0, len(rows))
	for _, r := range rows {
		g := usage.GPU{Model: r.Model, Tenants: r.Tenants}
		if ns, _, ok := strings.Cut(r.Reservation, "/"); ok {
			g.ReservedBy, g.ReservationPhase = ns, rotav1.ReservationPhase(r.ReservationPhase)
		}
		gpus = append(gpus, g)
	}
	held := usage.Charge(gpus)
	out := make([]Tenant, 0, len(held))
	for _, k := range usage.Keys(held) {
		out = append(out, Tenant{Key: k, Holding: held[k]})
	}
	return out
}

// WriteTenants writes the per-tenant summary `kubectl rota pool` prints
// below the GPUs.
func WriteTenants(w io.Writer, tenants []Tenant) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TENANT\tMODEL\tRESERVED\tCHARGED")
	for _, t := range tenants {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\n", t.Namespace, dash(t.Model), t.Reserved, t.Charged)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write tenants: %w", err)
	}
	return nil
}
