package fairness

import (
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestOrder(t *testing.T) {
	t0 := time.Date(2026, 10, 19, 8, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	pod := func(ns, name string, created int) Entry {
		return Entry{Namespace: ns, Name: name, Created: at(created), Queued: at(created)}
	}
	cases := map[string]struct {
		shares map[string]float64
		ageing time.Duration
		in     []Entry
		want   []string
	}{
		"a tenant holding nothing goes before a flooding tenant": {
			shares: map[string]float64{"x": 4},
			ageing: 5 * time.Minute,
			in:     []Entry{pod("x", "x-1", 0), pod("x", "x-2", 0), pod("y", "y-1", 30), pod("y", "y-2", 31)},
			want:   []string{"y/y-1", "y/y-2", "x/x-1", "x/x-2"},
		},
		"equal shares: the older pod first": {
			shares: map[string]float64{"x": 2, "y": 2},
			ageing: 5 * time.Minute,
			in:     []Entry{pod("y", "y-1", 30), pod("x", "x-1", 0)},
			want:   []string{"x/x-1", "y/y-1"},
		},
		"ageing: a pod that waited longer than its tenant's extra share goes first": {
			// x holds 1 weighted device more than y; ageing 60s per device.
			// x-old waited 120s longer than y-new: 120/60 = 2 > 1.
			shares: map[string]float64{"x": 2, "y": 1},
			ageing: time.Minute,
			in:     []Entry{pod("y", "y-new", 120), pod("x", "x-old", 0), pod("x", "x-mid", 90)},
			want:   []string{"x/x-old", "y/y-new", "x/x-mid"},
		},
		"higher priority first regardless of share": {
			shares: map[string]float64{"x": 10},
			ageing: time.Minute,
			in:     []Entry{pod("y", "y-1", 0), {Namespace: "x", Name: "x-1", Priority: 100, Created: at(50), Queued: at(50)}},
			want:   []string{"x/x-1", "y/y-1"},
		},
		"equal keys: queue time, then namespace, then name": {
			shares: map[string]float64{},
			ageing: time.Minute,
			in: []Entry{
				{Namespace: "b", Name: "p", Created: at(0), Queued: at(5)},
				{Namespace: "b", Name: "o", Created: at(0), Queued: at(5)},
				{Namespace: "a", Name: "z", Created: at(0), Queued: at(5)},
				{Namespace: "c", Name: "a", Created: at(0), Queued: at(1)},
			},
			want: []string{"c/a", "a/z", "b/o", "b/p"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := Order{Share: func(ns string) float64 { return tc.shares[ns] }, Ageing: tc.ageing}
			in := append([]Entry(nil), tc.in...)
			sort.SliceStable(in, func(i, j int) bool { return o.Less(in[i], in[j]) })
			var got []string
			for _, e := range in {
				got = append(got, e.Namespace+"/"+e.Name)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("order (-want +got):\n%s", diff)
			}
		})
	}
}

func TestArgsValidation(t *testing.T) {
	cases := map[string]struct {
		args FairnessArgs
		want string
	}{
		"defaults are valid": {args: FairnessArgs{}},
		"zero weight":        {args: FairnessArgs{Tenants: []TenantWeight{{Namespace: "x", Weight: 0}}}, want: "args.tenants[0].weight"},
		"bad namespace":      {args: FairnessArgs{Tenants: []TenantWeight{{Namespace: "X_", Weight: 1}}}, want: "args.tenants[0].namespace"},
		"duplicate":          {args: FairnessArgs{Tenants: []TenantWeight{{Namespace: "x", Weight: 1}, {Namespace: "x", Weight: 2}}}, want: "args.tenants[1].namespace"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := decodeArgs(&tc.args)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if (tc.want == "") != (err == nil) || (tc.want != "" && !strings.Contains(got, tc.want)) {
				t.Fatalf("decodeArgs error %q, want one naming %q", got, tc.want)
			}
		})
	}
}
