package quota

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime"
)

func TestDecodeArgs(t *testing.T) {
	cases := map[string]struct {
		in      runtime.Object
		want    *QuotaArgs
		wantErr string
	}{
		"none: no tenants, defaults": {
			want: &QuotaArgs{ModelAttribute: "model"},
		},
		"from the profile's YAML": {
			in: &runtime.Unknown{Raw: []byte(`{"tenants":[{"namespace":"team-a","limits":{"H100":8,"A100":16}}]}`), ContentType: runtime.ContentTypeJSON},
			want: &QuotaArgs{ModelAttribute: "model", Tenants: []TenantLimits{
				{Namespace: "team-a", Limits: map[string]int64{"H100": 8, "A100": 16}, OverLimit: OverLimitWait},
			}},
		},
		"negative limit": {
			in:      &QuotaArgs{Tenants: []TenantLimits{{Namespace: "team-a", Limits: map[string]int64{"H100": -1}}}},
			wantErr: "args.tenants[0].limits[H100]",
		},
		"unknown policy": {
			in:      &QuotaArgs{Tenants: []TenantLimits{{Namespace: "team-a", OverLimit: "Evict"}}},
			wantErr: "args.tenants[0].overLimit",
		},
		"duplicate tenant": {
			in:      &QuotaArgs{Tenants: []TenantLimits{{Namespace: "team-a"}, {Namespace: "team-a"}}},
			wantErr: "args.tenants[1].namespace",
		},
		"bad namespace": {
			in:      &QuotaArgs{Tenants: []TenantLimits{{Namespace: "Team A"}}},
			wantErr: "args.tenants[0].namespace",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := decodeArgs(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("decodeArgs error %v, want one naming %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("decodeArgs (-want +got):\n%s", diff)
			}
		})
	}
}
