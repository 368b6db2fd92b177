package gpuquota

import (
	"maps"
	"sort"

	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// Unlimited is a Terms limit that is not set.
const Unlimited = -1

// Terms are one tenant's numbers for one GPU model.
type Terms struct {
	// Guaranteed is how many GPUs the tenant can always get.
	Guaranteed int
	// Borrowing is how many it may hold beyond Guaranteed, or Unlimited.
	Borrowing int
	// Lending is how much of its idle guarantee others may borrow, or
	// Unlimited (all of it).
	Lending int
}

// Limit is the most GPUs of the model the tenant may hold, and false when
// there is no limit.
func (t Terms) Limit() (int, bool) {
	if t.Borrowing == Unlimited {
		return 0, false
	}
	return t.Guaranteed + t.Borrowing, true
}

// Borrowed is how many of n more GPUs a tenant holding used would hold
// beyond its guarantee.
func (t Terms) Borrowed(used, n int) int {
	return max(0, used+n-t.Guaranteed) - max(0, used-t.Guaranteed)
}

// Covers reports whether a tenant holding used stays within its guarantee
// with n more.
func (t Terms) Covers(used, n int) bool { return n > 0 && used+n <= t.Guaranteed }

// Reclaimable is how many GPUs a reclaim may take from a tenant holding
// used: what it holds beyond its guarantee, never a GPU within it.
func (t Terms) Reclaimable(used int) int { return max(0, used-t.Guaranteed) }

// Unlendable is how many of the tenant's idle guaranteed GPUs others may
// not borrow while it holds used: they stay free for it.
func (t Terms) Unlendable(used int) int {
	idle := max(0, t.Guaranteed-used)
	if t.Lending == Unlimited {
		return 0
	}
	return max(0, idle-t.Lending)
}

// Tenant is one namespace's terms per model.
type Tenant struct {
	Namespace string
	// OverLimit says what happens past a limit: Wait or Refuse.
	OverLimit rotav1.OverLimitPolicy
	Models    map[string]Terms
	// Source says where the terms come from: "GPUQuota team-a" or "Quota
	// plugin args".
	Source string
}

// Table is every tenant's terms. It is built whole and never changed, so
// readers share it without locks.
type Table struct {
	tenants map[string]*Tenant
	// guaranteed are the models some tenant is guaranteed GPUs of.
	guaranteed map[string]bool
}

// NewTable builds the table from the GPUQuotas that pass Validate and from
// tenants configured elsewhere (the Quota plugin's args, which are limits
// without a guarantee); a GPUQuota replaces such a tenant's terms whole.
// Invalid GPUQuotas are returned, for the caller to report.
func NewTable(quotas []*rotav1.GPUQuota, others []Tenant) (*Table, []*rotav1.GPUQuota) {
	t := &Table{tenants: map[string]*Tenant{}, guaranteed: map[string]bool{}}
	for i := range others {
		o := others[i]
		t.tenants[o.Namespace] = &o
	}
	var invalid []*rotav1.GPUQuota
	for _, q := range quotas {
		if len(Validate(q)) > 0 {
			invalid = append(invalid, q)
			continue
		}
		t.tenants[q.Name] = TenantOf(q)
	}
	for _, tn := range t.tenants {
		for m, terms := range tn.Models {
			if terms.Guaranteed > 0 {
				t.guaranteed[m] = true
			}
		}
	}
	return t, invalid
}

// TenantOf is a valid GPUQuota's terms.
func TenantOf(q *rotav1.GPUQuota) *Tenant {
	tn := &Tenant{Namespace: q.Name, OverLimit: q.Spec.OverLimit, Models: map[string]Terms{}, Source: "GPUQuota " + q.Name}
	if tn.OverLimit == "" {
		tn.OverLimit = rotav1.OverLimitWait
	}
	for _, m := range q.Spec.Models {
		terms := Terms{Guaranteed: int(m.Guaranteed), Borrowing: Unlimited, Lending: Unlimited}
		if m.BorrowingLimit != nil {
			terms.Borrowing = int(*m.BorrowingLimit)
		}
		if m.LendingLimit != nil {
			terms.Lending = int(*m.LendingLimit)
		}
		tn.Models[m.Model] = terms
	}
	return tn
}

// Equal reports whether two tables hold the same terms.
func (t *Table) Equal(o *Table) bool {
	if t == nil || o == nil {
		return t == o
	}
	if len(t.tenants) != len(o.tenants) {
		return false
	}
	for ns, a := range t.tenants {
		b, ok := o.tenants[ns]
		if !ok || a.OverLimit != b.OverLimit || !maps.Equal(a.Models, b.Models) {
			return false
		}
	}
	return true
}

// Tenant returns a namespace's terms; nil when it has none.
func (t *Table) Tenant(namespace string) *Tenant {
	if t == nil {
		return nil
	}
	return t.tenants[namespace]
}

// Terms returns a namespace's terms for a model; false when it has none
// (neither guaranteed nor limited).
func (t *Table) Terms(namespace, model string) (Terms, bool) {
	tn := t.Tenant(namespace)
	if tn == nil {
		return Terms{}, false
	}
	terms, ok := tn.Models[model]
	return terms, ok
}

// Namespaces are the tenants with terms, sorted.
func (t *Table) Namespaces() []string {
	if t == nil {
		return nil
	}
	out := make([]string, 0, len(t.tenants))
	for ns := range t.tenants {
		out = append(out, ns)
	}
	sort.Strings(out)
	return out
}

// Limits are the tenants' limits per model (guarantee plus borrowing
// limit), in the form the advisor and the pool report read; models without
// a limit are left out.
func (t *Table) Limits() map[string]map[string]int {
	out := map[string]map[string]int{}
	for _, ns := range t.Namespaces() {
		for model, terms := range t.tenants[ns].Models {
			if l, ok := terms.Limit(); ok {
				if out[ns] == nil {
					out[ns] = map[string]int{}
				}
				out[ns][model] = l
			}
		}
	}
	return out
}

// HasGuarantees reports whether some tenant is guaranteed GPUs of model:
// only then is anything of that model borrowed, and reclaimable.
func (t *Table) HasGuarantees(model string) bool {
	return t != nil && t.guaranteed[model]
}

// AnyGuarantees reports whether some tenant is guaranteed GPUs of some
// model.
func (t *Table) AnyGuarantees() bool { return t != nil && len(t.guaranteed) > 0 }

// TermsOrDefault returns a namespace's terms for a model, or, when it has
// none but some tenant is guaranteed that model, the terms of a tenant
// without a guarantee (everything it holds is borrowed, without a limit);
// false when the model is neither guaranteed to anyone nor limited for
// the namespace.
func (t *Table) TermsOrDefault(namespace, model string) (Terms, bool) {
	if terms, ok := t.Terms(namespace, model); ok {
		return terms, true
	}
	if t.HasGuarantees(model) {
		return Terms{Borrowing: Unlimited, Lending: Unlimited}, true
	}
	return Terms{}, false
}

// Unlendable is how many idle GPUs of model the tenants other than
// namespace keep free for themselves (their guarantee beyond their lending
// limit), given each tenant's usage: a pod of namespace that would borrow
// may not take them.
func (t *Table) Unlendable(namespace, model string, used func(namespace string) int) int {
	n := 0
	for ns, tn := range t.tenantsOrNil() {
		if ns == namespace {
			continue
		}
		if terms, ok := tn.Models[model]; ok {
			n += terms.Unlendable(used(ns))
		}
	}
	return n
}

func (t *Table) tenantsOrNil() map[string]*Tenant {
	if t == nil {
		return nil
	}
	return t.tenants
}
