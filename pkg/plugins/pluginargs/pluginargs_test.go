package pluginargs

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

type testArgs struct {
	runtime.TypeMeta `json:",inline"`
	Limit            int `json:"limit"`
}

func (a *testArgs) DeepCopyObject() runtime.Object { c := *a; return &c }
func (a *testArgs) SetDefaults() {
	if a.Limit == 0 {
		a.Limit = 3
	}
}
func (a *testArgs) Validate(path *field.Path) field.ErrorList {
	if a.Limit < 0 {
		return field.ErrorList{field.Invalid(path.Child("limit"), a.Limit, "must not be negative")}
	}
	return nil
}

func TestDecode(t *testing.T) {
	tests := map[string]struct {
		obj     runtime.Object
		want    int
		wantErr string
	}{
		"no args: defaults":      {obj: nil, want: 3},
		"typed args":             {obj: &testArgs{Limit: 7}, want: 7},
		"raw args from the file": {obj: &runtime.Unknown{Raw: []byte(`{"limit": 5}`), ContentType: runtime.ContentTypeJSON}, want: 5},
		"invalid: field path":    {obj: &runtime.Unknown{Raw: []byte(`{"limit": -1}`), ContentType: runtime.ContentTypeJSON}, wantErr: "invalid Test args: args.limit: Invalid value: -1"},
		"unknown field":          {obj: &runtime.Unknown{Raw: []byte(`{"limt": 5}`), ContentType: runtime.ContentTypeJSON}, wantErr: "decode Test args"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := Decode("Test", tc.obj, &testArgs{})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Limit != tc.want {
				t.Errorf("limit %d, want %d", got.Limit, tc.want)
			}
		})
	}
}

func TestDecodeDoesNotModifyTypedArgs(t *testing.T) {
	in := &testArgs{}
	if _, err := Decode("Test", in, &testArgs{}); err != nil {
		t.Fatal(err)
	}
	if in.Limit != 0 {
		t.Errorf("the caller's args were defaulted in place: limit %d", in.Limit)
	}
}
