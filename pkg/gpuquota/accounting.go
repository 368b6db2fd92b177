package gpuquota

import (
	"fmt"
	"sort"
	"strings"
)

// Pool is what the accounting reads of the cluster, per model.
type Pool struct {
	// Healthy is how many GPUs of each model are published and not tainted
	// unhealthy.
	Healthy map[string]int
	// Used is each namespace's allocated GPUs per model.
	Used map[string]map[string]int
	// Reserved is, per namespace, the GPUs of each model its
	// GPUReservations hold.
	Reserved map[string]map[string]int
}

// Numbers are one tenant's numbers for one model.
type Numbers struct {
	Namespace  string
	Guaranteed int
	Used       int
	// Borrowed is what it holds beyond its guarantee.
	Borrowed int
	// Lent is how many of its idle guaranteed GPUs others borrow.
	Lent int
}

// ModelReport is one model's accounting.
type ModelReport struct {
	Model   string
	Healthy int
	// Committed is what the guarantees and reservations set aside: per
	// namespace the larger of its guarantee and its reserved GPUs (a
	// reserved GPU counts once, within the guarantee of its namespace).
	Committed int
	// Tenants are the namespaces with terms for the model, by name.
	Tenants []Numbers
	// Unguaranteed borrowed: GPUs borrowed from capacity nobody is
	// guaranteed.
	FromUnguaranteed int
}

// Fits reports whether the guarantees fit the healthy GPUs.
func (r ModelReport) Fits() bool { return r.Committed <= r.Healthy }

// Explain is the model's numbers in one line, as the GuaranteesFit
// condition says them: "H100: guarantees 24 (team-a 8, team-b 16) exceed
// the 16 healthy GPUs by 8".
func (r ModelReport) Explain() string {
	parts := make([]string, 0, len(r.Tenants))
	for _, n := range r.Tenants {
		if n.Guaranteed > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", n.Namespace, n.Guaranteed))
		}
	}
	who := ""
	if len(parts) > 0 {
		who = " (" + strings.Join(parts, ", ") + ")"
	}
	if r.Fits() {
		return fmt.Sprintf("%s: guarantees %d%s fit the %d healthy GPUs", r.Model, r.Committed, who, r.Healthy)
	}
	return fmt.Sprintf("%s: guarantees %d%s exceed the %d healthy GPUs by %d", r.Model, r.Committed, who, r.Healthy, r.Committed-r.Healthy)
}

// Account computes every model's report. Borrowing is charged first to
// the capacity nobody is guaranteed, then to the tenants' idle guarantees
// they lend, in namespace order; Lent says how much of each tenant's idle
// guarantee that is.
func Account(t *Table, p Pool) []ModelReport {
	models := map[string]bool{}
	for _, tn := range t.tenantsOrNil() {
		for m := range tn.Models {
			models[m] = true
		}
	}
	out := make([]ModelReport, 0, len(models))
	for _, model := range sortedKeys(models) {
		out = append(out, accountModel(t, p, model))
	}
	return out
}

func accountModel(t *Table, p Pool, model string) ModelReport {
	r := ModelReport{Model: model, Healthy: p.Healthy[model]}
	namespaces := map[string]bool{}
	for ns := range p.Reserved {
		if p.Reserved[ns][model] > 0 {
			namespaces[ns] = true
		}
	}
	for _, ns := range t.Namespaces() {
		if _, ok := t.Terms(ns, model); ok {
			namespaces[ns] = true
		}
	}
	borrowed := 0
	for _, ns := range sortedKeys(namespaces) {
		terms, ok := t.Terms(ns, model)
		r.Committed += max(terms.Guaranteed, p.Reserved[ns][model])
		if !ok {
			continue
		}
		used := p.Used[ns][model]
		n := Numbers{Namespace: ns, Guaranteed: terms.Guaranteed, Used: used, Borrowed: terms.Reclaimable(used)}
		borrowed += n.Borrowed
		r.Tenants = append(r.Tenants, n)
	}
	// Everyone's borrowing (tenants without terms take idle GPUs as well,
	// but only a tenant with terms borrows: without terms nothing is owed).
	unguaranteed := max(0, r.Healthy-r.Committed)
	r.FromUnguaranteed = min(borrowed, unguaranteed)
	left := borrowed - r.FromUnguaranteed
	for i := range r.Tenants {
		if left == 0 {
			break
		}
		n := &r.Tenants[i]
		terms, _ := t.Terms(n.Namespace, model)
		lendable := max(0, n.Guaranteed-n.Used) - terms.Unlendable(n.Used)
		n.Lent = min(left, max(0, lendable))
		left -= n.Lent
	}
	return r
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
