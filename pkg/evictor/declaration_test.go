package evictor

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseDeclaration(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Declaration
		err  string // a substring of the error; "" when it parses
	}{
		{in: "grace=90s,http=8080/checkpoint", want: Declaration{Grace: 90 * time.Second, HTTP: &Endpoint{Port: 8080, Path: "/checkpoint"}}},
		{in: "grace=5m", want: Declaration{Grace: 5 * time.Minute}},
		{in: " http = 1/ , grace = 1s ", want: Declaration{Grace: time.Second, HTTP: &Endpoint{Port: 1, Path: "/"}}},
		{in: "grace=1h,http=65535/a/b?now=1", want: Declaration{Grace: time.Hour, HTTP: &Endpoint{Port: 65535, Path: "/a/b?now=1"}}},
		{in: "", err: "annotation rota.dev/checkpoint: empty"},
		{in: "90s", err: `annotation rota.dev/checkpoint: "90s" is not key=value`},
		{in: "http=8080/x", err: "annotation rota.dev/checkpoint: grace: required"},
		{in: "grace=soon", err: `annotation rota.dev/checkpoint: grace: "soon" is not a duration`},
		{in: "grace=500ms", err: "grace: 500ms is less than 1s"},
		{in: "grace=2h", err: "grace: 2h0m0s is more than 1h0m0s"},
		{in: "grace=-5s", err: "grace: -5s is less than 1s"},
		{in: "grace=90s,grace=10s", err: "grace: given twice"},
		{in: "grace=90s,signal=TERM", err: "signal: unknown field (want grace or http)"},
		{in: "grace=90s,http=/checkpoint", err: "http: \"/checkpoint\" does not start with a port"},
		{in: "grace=90s,http=0/x", err: "http: port 0 is not a number from 1 to 65535"},
		{in: "grace=90s,http=65536/x", err: "http: port 65536 is not"},
		{in: "grace=90s,http=08080/x", err: "http: port 08080 is not"},
		{in: "grace=90s,http=99999999999999999999/x", err: "http: port 99999999999999999999 is not"},
		{in: "grace=90s,http=8080", err: `http: path "" does not start with /`},
		{in: "grace=90s,http=8080checkpoint", err: `http: path "checkpoint" does not start with /`},
		{in: "grace=90s,http=8080/a b", err: "http: path \"/a b\" has a space"},
		{in: "grace=90s,http=8080/" + strings.Repeat("a", 300), err: "http: path is longer than 256 characters"},
		{in: "grace=90s,http=8080/%zz", err: `http: path "/%zz" is not a URL path`},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseDeclaration(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParseDeclaration(%q) = %v, %v; want an error with %q", tc.in, got, err, tc.err)
				}
				var de *DeclarationError
				if !errors.As(err, &de) {
					t.Errorf("error %v is not a *DeclarationError", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseDeclaration(%q): %v", tc.in, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseDeclaration(%q) (-want +got):\n%s", tc.in, diff)
			}
			back, err := ParseDeclaration(got.String())
			if err != nil || !cmp.Equal(back, got) {
				t.Errorf("String() %q parses back to %v, %v", got.String(), back, err)
			}
		})
	}
}
