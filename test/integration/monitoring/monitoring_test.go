package monitoring

import (
	"context"
	"maps"
	"math"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/util/teststorage"

	"github.com/rota-dev/rota/test/integration/framework"
)

// firing are the alerts that fire at the end of the two runs; every other
// alert must stay silent there (neither run loses a driver, ends a
// transition badly, degrades a reservation or fails a binding). Each entry
// lists label sets (a subset of labels) that must be among the alert's
// series.
var firing = map[string][]map[string]string{
	// fallback: node-h100's gpu-1 gets XID 79 at +6m and never recovers.
	"RotaGPUUnhealthy": {{"node": "node-h100"}},
	// Still waiting when the runs end, evaluated an hour later: member d
	// of reservation-h200 (over the reservation's VRAM budget) and
	// fallback's train-7 (every H100 and A100 taken).
	"RotaPodsWaitingTooLong": {{"namespace": "team-a", "reason": "ReservationOvercommitted"}, {"namespace": "ml"}},
}

// TestOperationsKit evaluates every alert and dashboard query of
// manifests/monitoring with Prometheus's PromQL engine against the metrics
// the sandbox's components serve while the fallback and reservation-h200
// scenarios play (placements on fallback tiers, an unhealthy GPU, waits,
// schedule transitions, a reservation). Each query must parse and select
// only metric names the components export, so a renamed metric fails
// here; the dashboard's queries must all return data, and the alerts fire
// exactly as listed in firing.
func TestOperationsKit(t *testing.T) {
	p := parser.NewParser(parser.Options{})
	k := loadKit(t, p)

	anchors := headingAnchors(t, framework.RepoRoot(t)+"/docs/operations.md")
	expect := maps.Clone(firing)
	for _, a := range k.alerts {
		anchor, ok := strings.CutPrefix(a.runbook, runbookBase)
		if !ok || !anchors[anchor] {
			t.Errorf("alert %s: runbook_url %q is not a section of docs/operations.md (%s…)", a.name, a.runbook, runbookBase)
		}
		if _, known := expect[a.name]; !known {
			expect[a.name] = nil
		}
	}

	var s scrapes
	begin := time.Now()
	s.play(t, "fallback")
	s.play(t, "reservation-h200")
	t.Logf("scenarios played and scraped in %s: %d scrapes", time.Since(begin).Round(time.Millisecond), len(s.all))

	st := teststorage.New(t)
	// The state at the end of the runs as Prometheus sees it an hour later
	// (pods are created in real time; the runs' clocks are virtual).
	at := time.Now().Add(time.Hour)
	names, err := s.load(st, at)
	if err != nil {
		t.Fatalf("loading the scrapes: %v", err)
	}
	t.Logf("%d metric names scraped, %d of them Rota's", len(names), len(rotaNames(names)))

	engine := promql.NewEngine(promql.EngineOpts{MaxSamples: 50_000_000, Timeout: time.Minute, LookbackDelta: 5 * time.Minute, Parser: p})
	eval := func(t *testing.T, q query) promql.Vector {
		t.Helper()
		expr, err := p.ParseExpr(q.expr)
		if err != nil {
			t.Fatalf("parse %q: %v", q.expr, err)
		}
		for _, n := range metricNames(expr) {
			if !names[n] {
				t.Errorf("selects %s, which no component exported in the runs", n)
			}
		}
		qry, err := engine.NewInstantQuery(context.Background(), st, nil, q.expr, at)
		if err != nil {
			t.Fatalf("%q: %v", q.expr, err)
		}
		defer qry.Close()
		res := qry.Exec(context.Background())
		if res.Err != nil {
			t.Fatalf("evaluate %q: %v", q.expr, res.Err)
		}
		v, err := res.Vector()
		if err != nil {
			t.Fatalf("%q: %v", q.expr, err)
		}
		return v
	}

	for _, a := range k.alerts {
		t.Run("alert/"+a.name, func(t *testing.T) {
			v := eval(t, a)
			want := expect[a.name]
			if len(want) == 0 {
				if len(v) > 0 {
					t.Errorf("fires in runs where nothing it watches went wrong: %v", v)
				}
				return
			}
			for _, labels := range want {
				if !hasSeries(v, labels) {
					t.Errorf("no series with %v among %v", labels, v)
				}
			}
		})
	}
	for _, q := range k.panels {
		t.Run("panel/"+q.name, func(t *testing.T) {
			v := eval(t, q)
			for _, s := range v {
				if !math.IsNaN(s.F) {
					return
				}
			}
			t.Errorf("%q returns no number: %v", q.expr, v)
		})
	}

	var missing []string
	for name := range expect {
		if !hasAlert(k.alerts, name) {
			missing = append(missing, name)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("expected alerts that manifests/monitoring does not define: %v", missing)
	}
}

func hasSeries(v promql.Vector, want map[string]string) bool {
	for _, s := range v {
		ok := true
		for k, val := range want {
			if s.Metric.Get(k) != val {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

func hasAlert(alerts []query, name string) bool {
	for _, a := range alerts {
		if a.name == name {
			return true
		}
	}
	return false
}
