package monitoring

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"

	"github.com/rota-dev/rota/test/integration/framework"
)

// runbookBase is where every alert's runbook_url points.
const runbookBase = "https://github.com/rota-dev/rota/blob/main/docs/operations.md#"

// query is one PromQL expression of the kit: an alert's or a panel's.
type query struct {
	name, expr string
	// runbook is an alert's runbook_url ("" for a panel).
	runbook string
}

// kit is manifests/monitoring as `kubectl apply -k` would apply it.
type kit struct {
	alerts []query
	panels []query
}

// loadKit reads manifests/monitoring: it checks that the kustomization
// applies the PrometheusRule and generates the dashboard ConfigMap, checks
// the PrometheusRule's groups with Prometheus's own rules parser (rulefmt)
// and collects the alert expressions and the dashboard's panel queries.
//
// The files are read, not rendered with kustomize's Go API: that API
// imports package plugin, which makes the linker bind every symbol at
// start-up (-z now), and go-nvml's symbols, resolved only when a real NVML
// is loaded, would then stop the test binary before it starts.
func loadKit(t *testing.T, p parser.Parser) kit {
	t.Helper()
	dir := filepath.Join(framework.RepoRoot(t), "manifests", "monitoring")
	var kust struct {
		Resources          []string `json:"resources"`
		ConfigMapGenerator []struct {
			Files []string `json:"files"`
		} `json:"configMapGenerator"`
	}
	readYAML(t, filepath.Join(dir, "kustomization.yaml"), &kust)
	if !slices.Equal(kust.Resources, []string{"prometheusrule.yaml"}) || len(kust.ConfigMapGenerator) != 1 ||
		!slices.Equal(kust.ConfigMapGenerator[0].Files, []string{"rota.json=dashboard.json"}) {
		t.Fatalf("manifests/monitoring/kustomization.yaml applies %v and generates %+v; want prometheusrule.yaml and a ConfigMap of dashboard.json", kust.Resources, kust.ConfigMapGenerator)
	}

	var rule struct {
		APIVersion string         `json:"apiVersion"`
		Kind       string         `json:"kind"`
		Spec       map[string]any `json:"spec"`
	}
	readYAML(t, filepath.Join(dir, "prometheusrule.yaml"), &rule)
	if rule.APIVersion != "monitoring.coreos.com/v1" || rule.Kind != "PrometheusRule" {
		t.Errorf("prometheusrule.yaml is a %s %s, want a monitoring.coreos.com/v1 PrometheusRule", rule.APIVersion, rule.Kind)
	}
	spec, err := yaml.Marshal(rule.Spec)
	if err != nil {
		t.Fatal(err)
	}
	groups, errs := rulefmt.Parse(spec, false, model.UTF8Validation, p, slog.New(slog.DiscardHandler))
	for _, e := range errs {
		t.Errorf("PrometheusRule: rulefmt: %v", e)
	}
	if groups == nil {
		t.FailNow()
	}
	var k kit
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				t.Errorf("group %s: a rule without alert (recording rules are not evaluated here)", g.Name)
				continue
			}
			k.alerts = append(k.alerts, query{name: r.Alert, expr: r.Expr, runbook: r.Annotations["runbook_url"]})
			for _, a := range []string{"summary", "description"} {
				if r.Annotations[a] == "" {
					t.Errorf("alert %s: no %s annotation", r.Alert, a)
				}
			}
			if r.Labels["severity"] == "" {
				t.Errorf("alert %s: no severity label", r.Alert)
			}
		}
	}
	dash, err := os.ReadFile(filepath.Join(dir, "dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	k.panels = panelQueries(t, "dashboard.json", dash)
	return k
}

func readYAML(t *testing.T, path string, into any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// grafanaPanel is what the test reads of a dashboard panel.
type grafanaPanel struct {
	Title   string         `json:"title"`
	Type    string         `json:"type"`
	Panels  []grafanaPanel `json:"panels"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

// grafanaVariables are the Grafana variables the queries may use, and
// what the test puts in their place: windows that span the scraped runs.
var grafanaVariables = strings.NewReplacer("$__rate_interval", "2d", "$__interval", "2d", "$__range", "2d")

// panelQueries are the queries of every panel of a dashboard, rows'
// panels included, Grafana variables replaced.
func panelQueries(t *testing.T, file string, b []byte) []query {
	t.Helper()
	var d struct {
		Panels []grafanaPanel `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("dashboard %s: %v", file, err)
	}
	var out []query
	var walk func([]grafanaPanel)
	walk = func(ps []grafanaPanel) {
		for _, p := range ps {
			walk(p.Panels)
			if p.Type == "row" {
				continue
			}
			if len(p.Targets) == 0 {
				t.Errorf("dashboard %s: panel %q has no query", file, p.Title)
			}
			for i, tg := range p.Targets {
				expr := grafanaVariables.Replace(tg.Expr)
				if strings.Contains(expr, "$") {
					t.Errorf("dashboard %s: panel %q query %d uses a variable the test does not know: %s", file, p.Title, i, tg.Expr)
				}
				out = append(out, query{name: fmt.Sprintf("%s[%d]", p.Title, i), expr: expr})
			}
		}
	}
	walk(d.Panels)
	return out
}

// headingAnchors are the anchors GitHub gives the headings of a Markdown
// file: lower case, punctuation but '-' and '_' dropped, spaces to '-'.
func headingAnchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	drop := regexp.MustCompile(`[^\p{L}\p{N} _-]`)
	anchors := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.TrimSpace(strings.TrimLeft(line, "#"))
		anchors[strings.ReplaceAll(drop.ReplaceAllString(strings.ToLower(h), ""), " ", "-")] = true
	}
	return anchors
}

// metricNames are the metric names expr selects.
func metricNames(expr parser.Expr) []string {
	var names []string
	parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
		vs, ok := node.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		name := vs.Name
		for _, m := range vs.LabelMatchers {
			if m.Name == model.MetricNameLabel {
				name = m.Value
			}
		}
		names = append(names, name)
		return nil
	})
	return names
}
