package scheduler

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// TestBenchProfileMatchesShipped keeps rota-config.yaml, the profile the
// throughput benchmark measures, equal to the rota-scheduler profile in
// manifests/scheduler/config.yaml, less the documented differences: no
// Reservation plugin (its CRD is not served by scheduler_perf's apiserver),
// no Gang plugin with its args (it acts only on pods labelled rota.dev/gang;
// no benchmark pod is one), and the harness's PostBind tier observer.
func TestBenchProfileMatchesShipped(t *testing.T) {
	shipped := loadProfile(t, filepath.Join("..", "..", "..", "manifests", "scheduler", "config.yaml"))
	bench := loadProfile(t, "rota-config.yaml")

	plugins := shipped.Plugins
	notMeasured := func(name string) bool { return name == "Reservation" || name == "Gang" }
	plugins["multiPoint"].Enabled = slices.DeleteFunc(plugins["multiPoint"].Enabled, func(p plugin) bool { return notMeasured(p.Name) })
	shipped.PluginConfig = slices.DeleteFunc(shipped.PluginConfig, func(c map[string]any) bool { return notMeasured(c["name"].(string)) })
	delete(bench.Plugins, "postBind")
	if diff := cmp.Diff(plugins, bench.Plugins); diff != "" {
		t.Errorf("plugins differ from the shipped profile (-shipped +bench):\n%s", diff)
	}
	if diff := cmp.Diff(shipped.PluginConfig, bench.PluginConfig); diff != "" {
		t.Errorf("pluginConfig differs from the shipped profile (-shipped +bench):\n%s", diff)
	}
}

type plugin struct {
	Name   string `json:"name"`
	Weight *int   `json:"weight,omitempty"`
}

type pluginSet struct {
	Enabled  []plugin `json:"enabled,omitempty"`
	Disabled []plugin `json:"disabled,omitempty"`
}

type profile struct {
	Plugins      map[string]*pluginSet `json:"plugins"`
	PluginConfig []map[string]any      `json:"pluginConfig"`
}

func loadProfile(t *testing.T, path string) profile {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		PercentageOfNodesToScore int       `json:"percentageOfNodesToScore"`
		Profiles                 []profile `json:"profiles"`
	}
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if len(cfg.Profiles) != 1 || cfg.PercentageOfNodesToScore != 100 {
		t.Fatalf("%s: want one profile scoring 100%% of nodes, got %d profiles, %d%%", path, len(cfg.Profiles), cfg.PercentageOfNodesToScore)
	}
	return cfg.Profiles[0]
}
