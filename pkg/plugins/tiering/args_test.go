package tiering

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestDecodeArgs(t *testing.T) {
	tests := map[string]struct {
		in      runtime.Object
		want    *TieringArgs
		wantErr string
	}{
		"no args get the default version": {
			in:   nil,
			want: &TieringArgs{PolicyVersion: DefaultPolicyVersion},
		},
		"pluginConfig args as the scheduler passes them": {
			in:   &runtime.Unknown{Raw: []byte(`{"policyVersion":"2026-11-29"}`), ContentType: runtime.ContentTypeJSON},
			want: &TieringArgs{PolicyVersion: "2026-11-29"},
		},
		"pruning switched off": {
			in:   &runtime.Unknown{Raw: []byte(`{"policyVersion":"v1","disablePruning":true}`), ContentType: runtime.ContentTypeJSON},
			want: &TieringArgs{PolicyVersion: "v1", DisablePruning: true},
		},
		"typed args": {
			in:   &TieringArgs{PolicyVersion: "v7"},
			want: &TieringArgs{PolicyVersion: "v7"},
		},
		"too long a version is rejected with its path": {
			in:      &TieringArgs{PolicyVersion: string(make([]byte, 64))},
			wantErr: "args.policyVersion",
		},
		"malformed JSON": {
			in:      &runtime.Unknown{Raw: []byte(`{"policyVersion":`), ContentType: runtime.ContentTypeJSON},
			wantErr: "decode Tiering args",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := decodeArgs(tc.in)
			if tc.wantErr != "" {
				if err == nil || !contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("args (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateArgs(t *testing.T) {
	errs := (&TieringArgs{PolicyVersion: "bad\nversion"}).Validate(field.NewPath("args"))
	want := field.ErrorList{field.Invalid(field.NewPath("args", "policyVersion"), "bad\nversion", "must not contain control characters")}
	if diff := cmp.Diff(want.ToAggregate().Error(), errs.ToAggregate().Error()); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}

func contains(s, sub string) bool {
	return len(sub) == 0 || (len(s) >= len(sub) && (s[:len(sub)] == sub || contains(s[1:], sub)))
}
