package monitoring

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/textparse"
	"github.com/prometheus/prometheus/storage"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/rota-dev/rota/pkg/sandbox/cluster"
	"github.com/rota-dev/rota/pkg/sandbox/run"
	"github.com/rota-dev/rota/pkg/sandbox/scenario"
	"github.com/rota-dev/rota/test/integration/framework"
)

// scrape is one GET of a component's /metrics, as a Prometheus scrape
// would see it.
type scrape struct {
	scenario, job, instance string
	at                      time.Time // virtual time of the sandbox
	contentType             string
	body                    []byte
}

// scrapes collects the scrapes of scenario runs.
type scrapes struct {
	mu  sync.Mutex
	all []scrape
	// end is each scenario's last scrape time.
	end map[string]time.Time
}

// observe scrapes every metrics endpoint of c through its real handler.
func (s *scrapes) observe(name string) func(ctx context.Context, c *cluster.Cluster, at time.Time) error {
	return func(ctx context.Context, c *cluster.Cluster, at time.Time) error {
		// The end of a run can fall on its last checkpoint: keep one
		// scrape per time, the later.
		s.mu.Lock()
		kept := s.all[:0]
		for _, sc := range s.all {
			if sc.scenario != name || !sc.at.Equal(at) {
				kept = append(kept, sc)
			}
		}
		s.all = kept
		s.mu.Unlock()
		for _, ep := range c.MetricsEndpoints() {
			req := httptest.NewRequestWithContext(ctx, http.MethodGet, "/metrics", nil)
			// What Prometheus asks for when it does not negotiate protobuf.
			req.Header.Set("Accept", "text/plain;version=0.0.4;q=0.9,*/*;q=0.1")
			rec := httptest.NewRecorder()
			ep.Handler.ServeHTTP(rec, req)
			res := rec.Result()
			body, err := io.ReadAll(res.Body)
			if err != nil {
				return err
			}
			if res.StatusCode != http.StatusOK {
				return fmt.Errorf("%s %s: /metrics answered %d: %s", ep.Job, ep.Instance, res.StatusCode, body)
			}
			s.mu.Lock()
			s.all = append(s.all, scrape{scenario: name, job: ep.Job, instance: ep.Instance, at: at, contentType: res.Header.Get("Content-Type"), body: body})
			if s.end == nil {
				s.end = map[string]time.Time{}
			}
			s.end[name] = at
			s.mu.Unlock()
		}
		return nil
	}
}

// play runs a shipped scenario, scraping at each checkpoint and at the end.
func (s *scrapes) play(t *testing.T, name string) {
	t.Helper()
	root := framework.RepoRoot(t)
	sc, err := scenario.Load(filepath.Join(root, "examples", "scenarios", name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(1)))
	ctx := klog.NewContext(context.Background(), logger)
	rep, err := run.Run(ctx, run.Options{RepoRoot: root, Dir: filepath.Join(t.TempDir(), "cluster"), Scenario: sc, Observe: s.observe(name)})
	if err != nil {
		t.Fatalf("scenario %s: %v", name, err)
	}
	if !rep.Passed {
		t.Fatalf("scenario %s: the report says FAIL; the metrics would describe a run that went wrong", name)
	}
}

// load appends every scrape to st the way a Prometheus scrape loop does:
// each sample gets the target's job and instance labels (instance
// prefixed with the scenario, so that the runs' series stay apart), and
// each target an up sample of 1. Each scenario's scrapes are shifted so
// that its last lands at end: the runs' virtual clocks start on different
// days, and the queries are evaluated at one time. It returns the metric
// names seen.
func (s *scrapes) load(st storage.Appendable, end time.Time) (map[string]bool, error) {
	names := map[string]bool{"up": true}
	var errs []error
	shifted := func(sc scrape) int64 { return end.Add(-s.end[sc.scenario].Sub(sc.at)).UnixMilli() }
	// The storage takes samples in time order.
	all := slices.Clone(s.all)
	slices.SortStableFunc(all, func(a, b scrape) int { return cmp.Compare(shifted(a), shifted(b)) })
	for _, sc := range all {
		app := st.Appender(context.Background())
		ts := shifted(sc)
		instance := sc.scenario + "/" + sc.instance
		target := func(l labels.Labels) labels.Labels {
			return labels.NewBuilder(l).Set("job", sc.job).Set("instance", instance).Labels()
		}
		if _, err := app.Append(0, target(labels.FromStrings("__name__", "up")), ts, 1); err != nil {
			errs = append(errs, err)
		}
		p, err := textparse.New(sc.body, sc.contentType, labels.NewSymbolTable(), textparse.ParserOptions{})
		if err != nil || p == nil {
			errs = append(errs, fmt.Errorf("%s %s: content type %q: %w", sc.job, instance, sc.contentType, err))
			continue
		}
		for {
			entry, err := p.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("%s %s: %w", sc.job, instance, err))
				break
			}
			if entry != textparse.EntrySeries {
				continue
			}
			_, _, v := p.Series()
			var l labels.Labels
			p.Labels(&l)
			names[l.Get("__name__")] = true
			if _, err := app.Append(0, target(l), ts, v); err != nil {
				errs = append(errs, fmt.Errorf("%s %s %s: %w", sc.job, instance, l, err))
			}
		}
		if err := app.Commit(); err != nil {
			errs = append(errs, err)
		}
	}
	return names, errors.Join(errs...)
}

// rotaNames are the Rota metric names in names.
func rotaNames(names map[string]bool) []string {
	var out []string
	for n := range names {
		if strings.HasPrefix(n, "rota_") {
			out = append(out, n)
		}
	}
	return out
}
