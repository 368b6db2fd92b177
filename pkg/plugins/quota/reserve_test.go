package quota

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// overLimits judges the devices actually granted, model by model, against
// what the tenant holds: the numbers a QuotaExceeded refusal at Reserve
// quotes.
func TestOverLimits(t *testing.T) {
	tenant := &argTenants(&QuotaArgs{Tenants: []TenantLimits{{Namespace: "team-a", Limits: map[string]int64{"H100": 1, "A100": 4}}}})[0]
	tests := map[string]struct {
		use, granted map[string]int64
		want         []string
	}{
		"within every limit":   {use: map[string]int64{"A100": 3}, granted: map[string]int64{"A100": 1, "H100": 1}},
		"unlimited model":      {use: map[string]int64{"L4": 100}, granted: map[string]int64{"L4": 8}},
		"two H100s, limit one": {granted: map[string]int64{"A100": 1, "H100": 2}, want: []string{"team-a holds 0 of 1 H100 and this pod would take 2 more: 2 > 1"}},
		"over on two models": {
			use: map[string]int64{"A100": 4, "H100": 1}, granted: map[string]int64{"A100": 1, "H100": 1},
			want: []string{"team-a holds 4 of 4 A100 and this pod would take 1 more: 5 > 4", "team-a holds 1 of 1 H100 and this pod would take 1 more: 2 > 1"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, overLimits(tenant, tc.use, tc.granted)); diff != "" {
				t.Errorf("overLimits (-want +got):\n%s", diff)
			}
		})
	}
	if got := describeGrant(map[string]int64{"H100": 2, "A100": 1}); got != "1 A100, 2 H100" {
		t.Errorf("describeGrant = %q", got)
	}
}
