package gpuquota

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

func quota(name string, models ...rotav1.ModelQuota) *rotav1.GPUQuota {
	return &rotav1.GPUQuota{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: rotav1.GPUQuotaSpec{Models: models}}
}

func TestTermsBorrowAndReclaim(t *testing.T) {
	terms := Terms{Guaranteed: 8, Borrowing: 8, Lending: Unlimited}
	if l, ok := terms.Limit(); !ok || l != 16 {
		t.Errorf("Limit = %d, %v; want 16, true", l, ok)
	}
	for _, tc := range []struct{ used, n, borrowed int }{{0, 4, 0}, {6, 4, 2}, {8, 2, 2}, {12, 2, 2}} {
		if got := terms.Borrowed(tc.used, tc.n); got != tc.borrowed {
			t.Errorf("Borrowed(%d, %d) = %d, want %d", tc.used, tc.n, got, tc.borrowed)
		}
	}
	if !terms.Covers(4, 4) || terms.Covers(6, 4) || terms.Covers(0, 0) {
		t.Error("Covers: a pod is covered only when it stays within the guarantee")
	}
	if got := terms.Reclaimable(16); got != 8 {
		t.Errorf("Reclaimable(16) = %d, want 8: never below the guarantee", got)
	}
	if got := terms.Reclaimable(5); got != 0 {
		t.Errorf("Reclaimable(5) = %d, want 0", got)
	}
	lend2 := Terms{Guaranteed: 8, Borrowing: Unlimited, Lending: 2}
	if got := lend2.Unlendable(1); got != 5 {
		t.Errorf("Unlendable(1) = %d, want 5 (7 idle, 2 lendable)", got)
	}
	if _, ok := lend2.Limit(); ok {
		t.Error("no borrowing limit: no limit")
	}
}

func TestValidateNamesFieldPaths(t *testing.T) {
	bad := quota("Team_A", rotav1.ModelQuota{Model: "H100", Guaranteed: 2, LendingLimit: ptr.To[int32](3)},
		rotav1.ModelQuota{Model: "H100", Guaranteed: -1, BorrowingLimit: ptr.To[int32](-2)})
	bad.Spec.OverLimit = "Maybe"
	got := Validate(bad).ToAggregate().Error()
	for _, want := range []string{"metadata.name", "spec.models[0].lendingLimit", "spec.models[1].model: Duplicate", "spec.models[1].guaranteed", "spec.models[1].borrowingLimit", "spec.overLimit: Unsupported"} {
		if !strings.Contains(got, want) {
			t.Errorf("Validate: %q lacks %q", got, want)
		}
	}
	if errs := Validate(quota("team-a", rotav1.ModelQuota{Model: "H100", Guaranteed: 8})); len(errs) > 0 {
		t.Errorf("valid quota: %v", errs)
	}
}

func TestTableGPUQuotaReplacesArgs(t *testing.T) {
	args := []Tenant{{Namespace: "team-a", Models: map[string]Terms{"A100": {Borrowing: 4, Lending: Unlimited}}, Source: "Quota plugin args"},
		{Namespace: "team-c", Models: map[string]Terms{"H100": {Borrowing: 2, Lending: Unlimited}}}}
	tbl, invalid := NewTable([]*rotav1.GPUQuota{
		quota("team-a", rotav1.ModelQuota{Model: "H100", Guaranteed: 8}),
		quota("bad", rotav1.ModelQuota{Model: "H100", Guaranteed: -1}),
	}, args)
	if len(invalid) != 1 || invalid[0].Name != "bad" {
		t.Errorf("invalid = %v, want [bad]", invalid)
	}
	if _, ok := tbl.Terms("team-a", "A100"); ok {
		t.Error("team-a's GPUQuota must replace its args whole")
	}
	if terms, ok := tbl.Terms("team-a", "H100"); !ok || terms.Guaranteed != 8 || terms.Borrowing != Unlimited {
		t.Errorf("team-a H100 = %+v, %v", terms, ok)
	}
	if got := tbl.Limits(); len(got) != 1 || got["team-c"]["H100"] != 2 {
		t.Errorf("Limits = %v, want only team-c's H100 2", got)
	}
	if tbl.Tenant("bad") != nil {
		t.Error("an invalid GPUQuota must not be used")
	}
}

func TestAccountBorrowedLentAndFit(t *testing.T) {
	tbl, _ := NewTable([]*rotav1.GPUQuota{
		quota("team-a", rotav1.ModelQuota{Model: "H100", Guaranteed: 8}),
		quota("team-b", rotav1.ModelQuota{Model: "H100", Guaranteed: 8}),
	}, nil)
	reports := Account(tbl, Pool{Healthy: map[string]int{"H100": 16}, Used: map[string]map[string]int{"team-b": {"H100": 16}}})
	if len(reports) != 1 {
		t.Fatalf("reports = %v", reports)
	}
	r := reports[0]
	if !r.Fits() || r.Committed != 16 {
		t.Errorf("16 guaranteed of 16 healthy must fit: %+v", r)
	}
	a, b := r.Tenants[0], r.Tenants[1]
	if a.Lent != 8 || a.Used != 0 || b.Borrowed != 8 || b.Lent != 0 {
		t.Errorf("team-a %+v, team-b %+v: want a lending 8, b borrowing 8", a, b)
	}

	tbl, _ = NewTable([]*rotav1.GPUQuota{
		quota("team-a", rotav1.ModelQuota{Model: "H100", Guaranteed: 8}),
		quota("team-b", rotav1.ModelQuota{Model: "H100", Guaranteed: 16}),
	}, nil)
	// team-c's reservation of 4 counts, team-a's 6 reserved fall within its guarantee of 8.
	r = Account(tbl, Pool{Healthy: map[string]int{"H100": 16}, Reserved: map[string]map[string]int{"team-a": {"H100": 6}, "team-c": {"H100": 4}}})[0]
	if r.Fits() || r.Committed != 28 {
		t.Errorf("committed = %d, fits %v; want 28, false", r.Committed, r.Fits())
	}
	if got, want := r.Explain(), "H100: guarantees 28 (team-a 8, team-b 16) exceed the 16 healthy GPUs by 12"; got != want {
		t.Errorf("Explain = %q, want %q", got, want)
	}
}

func TestAccountBorrowsUnguaranteedFirst(t *testing.T) {
	tbl, _ := NewTable([]*rotav1.GPUQuota{
		quota("team-a", rotav1.ModelQuota{Model: "H100", Guaranteed: 4, LendingLimit: ptr.To[int32](1)}),
		quota("team-b", rotav1.ModelQuota{Model: "H100", Guaranteed: 2}),
	}, nil)
	r := Account(tbl, Pool{Healthy: map[string]int{"H100": 10}, Used: map[string]map[string]int{"team-b": {"H100": 7}}})[0]
	// b borrows 5: 4 from the unguaranteed GPUs (10 - 6), 1 from a, whose lending limit is 1.
	if r.FromUnguaranteed != 4 || r.Tenants[0].Lent != 1 {
		t.Errorf("report %+v: want 4 from unguaranteed, team-a lending 1", r)
	}
	if got := tbl.Unlendable("team-b", "H100", func(ns string) int { return map[string]int{"team-b": 7}[ns] }); got != 3 {
		t.Errorf("Unlendable for team-b = %d, want team-a's 4 idle minus its lending limit 1", got)
	}
}

func TestTableEqual(t *testing.T) {
	a, _ := NewTable([]*rotav1.GPUQuota{quota("team-a", rotav1.ModelQuota{Model: "H100", Guaranteed: 8})}, nil)
	b, _ := NewTable([]*rotav1.GPUQuota{quota("team-a", rotav1.ModelQuota{Model: "H100", Guaranteed: 8})}, nil)
	c, _ := NewTable([]*rotav1.GPUQuota{quota("team-a", rotav1.ModelQuota{Model: "H100", Guaranteed: 8, BorrowingLimit: ptr.To[int32](2)})}, nil)
	if !a.Equal(b) || a.Equal(c) || a.Equal(nil) {
		t.Error("Equal: same terms equal, a borrowing limit added differs, nil differs")
	}
}
