package pluginargs_test

import (
	"testing"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/rota-dev/rota/pkg/plugins/fairness"
	"github.com/rota-dev/rota/pkg/plugins/gang"
	"github.com/rota-dev/rota/pkg/plugins/pluginargs"
	"github.com/rota-dev/rota/pkg/plugins/quota"
	"github.com/rota-dev/rota/pkg/plugins/tiering"
)

// FuzzPluginArgs feeds arbitrary pluginConfig args, as kube-scheduler hands
// them to out-of-tree plugins (runtime.Unknown), to every Rota plugin that
// takes args. Whatever the bytes: no panic; args a plugin accepts are
// defaulted and valid, defaulting them again changes nothing, and written
// out and read back they decode to the same args.
//
//	make fuzz FUZZTIME=30s (or: go test ./pkg/plugins/pluginargs -run '^$' -fuzz FuzzPluginArgs)
func FuzzPluginArgs(f *testing.F) {
	for _, seed := range []string{
		`policyVersion: v1`,
		`{tenants: [{namespace: team-a, limits: {H100: 2, A100: 4}, overLimit: Refuse}], modelAttribute: gpu.rota.dev/model}`,
		`{defaultWeight: 2, tenants: [{namespace: team-a, weight: 3}], ageing: 90s}`,
		`waitLimit: 15m`, `{tenants: [{namespace: "", limits: {"": -1}}]}`, `ageing: -1s`, `[]`, `{`, ``,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		checkArgs(t, tiering.Name, raw, func() pluginargs.Args { return &tiering.TieringArgs{} })
		checkArgs(t, quota.Name, raw, func() pluginargs.Args { return &quota.QuotaArgs{} })
		checkArgs(t, fairness.Name, raw, func() pluginargs.Args { return &fairness.FairnessArgs{} })
		checkArgs(t, gang.Name, raw, func() pluginargs.Args { return &gang.GangArgs{} })
	})
}

func checkArgs(t *testing.T, plugin string, raw []byte, empty func() pluginargs.Args) {
	t.Helper()
	args, err := pluginargs.Decode(plugin, &runtime.Unknown{Raw: raw}, empty())
	if err != nil {
		return
	}
	if errs := args.Validate(field.NewPath("args")); len(errs) > 0 {
		t.Fatalf("%s accepted invalid args %q: %v", plugin, raw, errs)
	}
	again := args.DeepCopyObject().(pluginargs.Args)
	again.SetDefaults()
	if !apiequality.Semantic.DeepEqual(args, again) {
		t.Fatalf("%s: defaulting accepted args %q twice changed them: %#v then %#v", plugin, raw, args, again)
	}
	out, err := yaml.Marshal(args)
	if err != nil {
		t.Fatalf("%s: writing accepted args %q: %v", plugin, raw, err)
	}
	back, err := pluginargs.Decode(plugin, &runtime.Unknown{Raw: out}, empty())
	if err != nil {
		t.Fatalf("%s: args %q written as %q do not decode again: %v", plugin, raw, out, err)
	}
	if !apiequality.Semantic.DeepEqual(args, back) {
		t.Fatalf("%s: args %q changed on a round trip through %q: %#v then %#v", plugin, raw, out, args, back)
	}
}
