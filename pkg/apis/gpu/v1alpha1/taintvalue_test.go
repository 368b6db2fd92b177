package v1alpha1

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestReservedTaintValueRoundTrip(t *testing.T) {
	if got := ReservedTaintValue("team-a", "serving"); got != "team-a.serving" {
		t.Fatalf("ReservedTaintValue = %q, want team-a.serving", got)
	}
	tests := map[string]struct {
		in            string
		wantNS, wantN string
		wantOK        bool
	}{
		"namespace.name":          {in: "team-a.serving", wantNS: "team-a", wantN: "serving", wantOK: true},
		"dotted reservation name": {in: "team-a.serving.v2", wantNS: "team-a", wantN: "serving.v2", wantOK: true},
		"no dot":                  {in: "serving"},
		"empty namespace":         {in: ".serving"},
		"empty name":              {in: "team-a."},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ns, n, ok := ParseReservedTaintValue(tc.in)
			if diff := cmp.Diff([]any{tc.wantNS, tc.wantN, tc.wantOK}, []any{ns, n, ok}); diff != "" {
				t.Errorf("ParseReservedTaintValue(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}
