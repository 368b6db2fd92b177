package poolreport

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/gpuquota"
)

// Guarantee is one tenant's numbers for one model of its GPUQuota.
type Guarantee struct {
	Namespace  string `json:"namespace"`
	Model      string `json:"model"`
	Guaranteed int    `json:"guaranteed"`
	Used       int    `json:"used"`
	Borrowed   int    `json:"borrowed"`
	Lent       int    `json:"lent"`
	// FromStatus is true when the numbers are the GPUQuota's status (its
	// controller's, for the generation of its spec); false when they were
	// computed from the GPUs listed.
	FromStatus bool `json:"fromStatus"`
}

// Guarantees is the guarantees section of `kubectl rota pool`.
type Guarantees struct {
	Tenants []Guarantee `json:"tenants"`
	// Fit is one line per model: whether the guarantees fit its healthy
	// GPUs, with the numbers (gpuquota.ModelReport.Explain), computed from
	// the GPUs listed; then one line per GPUQuota that is invalid.
	Fit []string `json:"fit"`
}

// ListGPUQuotas reads every GPUQuota. Tenants may not read them
// (docs/security.md), and clusters without the CRD have none: callers
// leave the section out on an error.
func ListGPUQuotas(ctx context.Context, dyn dynamic.Interface) ([]*rotav1.GPUQuota, error) {
	list, err := dyn.Resource(rotav1.GPUQuotasResource).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list GPUQuotas: %w", err)
	}
	out := make([]*rotav1.GPUQuota, 0, len(list.Items))
	for i := range list.Items {
		q, err := gpuquota.FromObject(&list.Items[i])
		if err != nil {
			return nil, err
		}
		out = append(out, q)
	}
	return out, nil
}

// PoolOf is what the GPUQuota accounting reads, from the rows: healthy
// GPUs per model (not tainted by the driver unhealthy), GPUs each tenant's
// claims hold (each once), and the healthy GPUs each namespace's
// reservations hold — what the GPUQuota status controller reads from the
// same objects.
func PoolOf(rows []GPU) gpuquota.Pool {
	p := gpuquota.Pool{Healthy: map[string]int{}, Used: map[string]map[string]int{}, Reserved: map[string]map[string]int{}}
	add := func(m map[string]map[string]int, ns, model string) {
		if m[ns] == nil {
			m[ns] = map[string]int{}
		}
		m[ns][model]++
	}
	for _, r := range rows {
		if r.Model == "" {
			continue
		}
		healthy := !strings.Contains(r.Health, gpuv1.UnhealthyTaintKey)
		if healthy {
			p.Healthy[r.Model]++
		}
		for _, ns := range r.Tenants { // deduplicated per row
			add(p.Used, ns, r.Model)
		}
		if ns, _, ok := strings.Cut(r.Reservation, "/"); ok && healthy {
			add(p.Reserved, ns, r.Model)
		}
	}
	return p
}

// GuaranteesOf is the guarantees section: per tenant and model of its
// GPUQuota, the numbers of its status when the status describes the
// current spec, else those computed from the rows with gpuquota.Account;
// and per model whether the guarantees fit, computed from the rows.
func GuaranteesOf(quotas []*rotav1.GPUQuota, rows []GPU) Guarantees {
	table, invalid := gpuquota.NewTable(quotas, nil)
	reports := gpuquota.Account(table, PoolOf(rows))
	computed := map[[2]string]gpuquota.Numbers{}
	var g Guarantees
	for _, r := range reports {
		for _, n := range r.Tenants {
			computed[[2]string{n.Namespace, r.Model}] = n
		}
		g.Fit = append(g.Fit, r.Explain())
	}
	bad := map[string]bool{}
	for _, q := range invalid {
		bad[q.Name] = true
		g.Fit = append(g.Fit, fmt.Sprintf("GPUQuota %s is invalid and not applied: %v", q.Name, gpuquota.Validate(q).ToAggregate()))
	}
	for _, q := range quotas {
		if bad[q.Name] {
			continue
		}
		status := map[string]rotav1.ModelQuotaStatus{}
		if q.Status.ObservedGeneration == q.Generation {
			for _, m := range q.Status.Models {
				status[m.Model] = m
			}
		}
		for _, m := range q.Spec.Models {
			row := Guarantee{Namespace: q.Name, Model: m.Model, Guaranteed: int(m.Guaranteed)}
			if s, ok := status[m.Model]; ok {
				row.Used, row.Borrowed, row.Lent, row.FromStatus = int(s.Used), int(s.Borrowed), int(s.Lent), true
			} else {
				n := computed[[2]string{q.Name, m.Model}]
				row.Used, row.Borrowed, row.Lent = n.Used, n.Borrowed, n.Lent
			}
			g.Tenants = append(g.Tenants, row)
		}
	}
	sort.SliceStable(g.Tenants, func(i, j int) bool {
		a, b := g.Tenants[i], g.Tenants[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Model < b.Model
	})
	return g
}

// WriteGuarantees writes the guarantees section `kubectl rota pool` prints
// below the tenants: the table, then the fit lines.
func WriteGuarantees(w io.Writer, g Guarantees) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TENANT\tMODEL\tGUARANTEED\tUSED\tBORROWED\tLENT")
	for _, t := range g.Tenants {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\n", t.Namespace, t.Model, t.Guaranteed, t.Used, t.Borrowed, t.Lent)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write guarantees: %w", err)
	}
	for _, line := range g.Fit {
		fmt.Fprintln(w, line)
	}
	return nil
}
