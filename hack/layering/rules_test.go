package main

import (
	"strings"
	"testing"
)

const mod = "github.com/rota-dev/rota"

func pkgOf(path string, imports ...string) pkg {
	p := pkg{ImportPath: mod + "/" + path}
	for _, i := range imports {
		if strings.Contains(i, ".") {
			p.Imports = append(p.Imports, i) // not Rota's
			continue
		}
		p.Imports = append(p.Imports, mod+"/"+i)
	}
	return p
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		pkg  pkg
		want string // "" for none, else the import that breaks a rule
	}{
		{"plugin imports the reservation rules", pkgOf("pkg/plugins/reservation", "pkg/reservation", "pkg/apis/gpu/v1alpha1", "k8s.io/api/core/v1"), ""},
		{"plugin imports the reservation controller", pkgOf("pkg/plugins/reservation", "pkg/reservation/controller"), "pkg/reservation/controller"},
		{"plugin imports the driver", pkgOf("pkg/plugins/tiering", "pkg/driver/gpu"), "pkg/driver/gpu"},
		{"apis import the evaluator", pkgOf("pkg/apis/rota/validation", "pkg/schedule"), "pkg/schedule"},
		{"apis import each other", pkgOf("pkg/apis/rota/v1alpha1", "pkg/apis/gpu/v1alpha1"), ""},
		{"driver imports the contract and itself", pkgOf("pkg/driver/state", "pkg/apis/gpu/v1alpha1", "pkg/driver/cdi"), ""},
		{"driver imports the API types", pkgOf("pkg/driver/state", "pkg/apis/rota/v1alpha1"), "pkg/apis/rota/v1alpha1"},
		{"reservation rules import their controller", pkgOf("pkg/reservation", "pkg/reservation/controller"), "pkg/reservation/controller"},
		{"reservation controller imports its rules", pkgOf("pkg/reservation/controller", "pkg/reservation"), ""},
		{"evaluator imports the schedule controller", pkgOf("pkg/schedule/preview", "pkg/schedule/controller"), "pkg/schedule/controller"},
		{"schedule controller imports the evaluator", pkgOf("pkg/schedule/controller", "pkg/schedule", "pkg/schedule/validation"), ""},
		{"library imports a binary", pkgOf("pkg/sandbox/run", "cmd/rota-sandbox"), "cmd/rota-sandbox"},
		{"binary wires anything", pkgOf("cmd/rota-sandbox", "pkg/sandbox/run", "pkg/sim/vclock"), ""},
		{"pool model imports the contract", pkgOf("pkg/gpupool", "pkg/apis/gpu/v1alpha1", "k8s.io/api/resource/v1"), ""},
		{"pool model imports the wait reasons", pkgOf("pkg/gpupool", "pkg/waits"), "pkg/waits"},
		{"pool model imports a plugin", pkgOf("pkg/gpupool", "pkg/plugins/cyclestate"), "pkg/plugins/cyclestate"},
		{"tools read the pool model", pkgOf("pkg/poolreport", "pkg/gpupool"), ""},
		{"reservation controller reads the pool model", pkgOf("pkg/reservation/controller", "pkg/gpupool", "pkg/reservation"), ""},
		{"schedule preview reads the pool model", pkgOf("pkg/schedule/preview", "pkg/gpupool"), ""},
		{"sandbox report reads the pool model", pkgOf("pkg/sandbox/report", "pkg/gpupool", "pkg/waits"), ""},
		{"quota status controller applies the quota rules to the pool model", pkgOf("pkg/quotastatus", "pkg/gpuquota", "pkg/gpupool", "pkg/usage", "pkg/reservation", "pkg/apis/rota/v1alpha1"), ""},
		{"quota status controller imports the reservation controller", pkgOf("pkg/quotastatus", "pkg/reservation/controller"), "pkg/reservation/controller"},
		{"plugin imports the quota status controller", pkgOf("pkg/plugins/quota", "pkg/quotastatus"), "pkg/quotastatus"},
		{"pool report reads the quota rules", pkgOf("pkg/poolreport", "pkg/gpuquota"), ""},
		{"registry imports a controller", pkgOf("pkg/scheduler", "pkg/plugins/tiering", "pkg/schedule/controller"), "pkg/schedule/controller"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vs := check(mod, []pkg{tc.pkg})
			switch {
			case tc.want == "" && len(vs) > 0:
				t.Errorf("unexpected violations: %v", vs)
			case tc.want != "" && (len(vs) == 0 || vs[0].Import != tc.want):
				t.Errorf("violations = %v, want one for %s", vs, tc.want)
			}
		})
	}
}
