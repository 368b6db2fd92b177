// Package timeline draws a sandbox run as a self-contained HTML page with
// an SVG chart: one row per GPU, coloured by the workload holding it over
// time, with schedule windows, transitions and checkpoints marked and the
// waiting pods listed with their reasons.
package timeline

import (
	"sort"
	"sync"
	"time"

	"github.com/rota-dev/rota/pkg/sandbox/report"
)

// Recorder keeps who held which GPU at each sample.
type Recorder struct {
	mu      sync.Mutex
	samples []sample
	gpus    map[string]report.GPU
}

type sample struct {
	at      time.Time
	holders map[string]report.Holder
}

// NewRecorder returns an empty recorder.
func NewRecorder() *Recorder { return &Recorder{gpus: map[string]report.GPU{}} }

// Add records the state at time at. Samples must come in time order.
func (r *Recorder) Add(at time.Time, st *report.State) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, g := range st.GPUs {
		r.gpus[k] = g
	}
	holders := make(map[string]report.Holder, len(st.Holders))
	for k, h := range st.Holders {
		holders[k] = h
	}
	if n := len(r.samples); n > 0 && r.samples[n-1].at.Equal(at) {
		r.samples[n-1].holders = holders
		return
	}
	r.samples = append(r.samples, sample{at: at, holders: holders})
}

// Segment is one stretch of a GPU held by one workload.
type Segment struct {
	From, To time.Time
	Workload string
	Pod      string
}

// Row is one GPU and who held it.
type Row struct {
	GPU      report.GPU
	Segments []Segment
}

// Rows are the GPUs (by node, then device index) with their segments up to end.
func (r *Recorder) Rows(end time.Time) []Row {
	r.mu.Lock()
	defer r.mu.Unlock()
	keys := make([]string, 0, len(r.gpus))
	for k := range r.gpus {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := r.gpus[keys[i]], r.gpus[keys[j]]
		if a.Node != b.Node {
			return a.Node < b.Node
		}
		if len(a.Name) != len(b.Name) {
			return len(a.Name) < len(b.Name)
		}
		return a.Name < b.Name
	})
	rows := make([]Row, 0, len(keys))
	for _, k := range keys {
		row := Row{GPU: r.gpus[k]}
		for i, s := range r.samples {
			h, ok := s.holders[k]
			if !ok {
				continue
			}
			to := end
			if i+1 < len(r.samples) {
				to = r.samples[i+1].at
			}
			if n := len(row.Segments); n > 0 && row.Segments[n-1].Workload == h.Workload && row.Segments[n-1].To.Equal(s.at) {
				row.Segments[n-1].To = to
				continue
			}
			row.Segments = append(row.Segments, Segment{From: s.at, To: to, Workload: h.Workload, Pod: h.Pod})
		}
		rows = append(rows, row)
	}
	return rows
}
