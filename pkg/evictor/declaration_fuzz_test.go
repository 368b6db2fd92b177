package evictor

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzParseDeclaration: no annotation panics the parser; whatever it
// accepts is within bounds, and its canonical form parses back to the same
// declaration.
func FuzzParseDeclaration(f *testing.F) {
	for _, seed := range []string{
		"grace=90s,http=8080/checkpoint", "grace=5m", " http = 1/ , grace = 1s ", "grace=1h,http=65535/a/b?now=1",
		"", ",", "=", "grace=", "grace=90s,", "grace=90s,http=", "grace=90s,http=8080", "grace=1.5s,http=80/%41",
		"grace=90s,grace=1m", "grace=2h", "grace=90s,http=0/", "grace=9223372036854775807ns",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		d, err := ParseDeclaration(in)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "annotation rota.dev/checkpoint: ") {
				t.Fatalf("error %q does not name the annotation", err)
			}
			return
		}
		if d.Grace < MinGrace || d.Grace > MaxGrace {
			t.Fatalf("%q: grace %s out of bounds", in, d.Grace)
		}
		if e := d.HTTP; e != nil && (e.Port < 1 || e.Port > 65535 || !strings.HasPrefix(e.Path, "/")) {
			t.Fatalf("%q: endpoint %+v out of bounds", in, *e)
		}
		back, err := ParseDeclaration(d.String())
		if err != nil {
			t.Fatalf("%q: canonical form %q does not parse: %v", in, d.String(), err)
		}
		if !cmp.Equal(back, d) {
			t.Fatalf("%q: canonical form %q parses to %+v, not %+v", in, d.String(), back, d)
		}
	})
}
