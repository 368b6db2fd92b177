//go:build benchscheduler

package scheduler

import (
	"flag"
	"fmt"
	"io"
	"slices"

	"k8s.io/component-base/metrics/legacyregistry"
)

// requestsAt is -rota-bench-requests-at: at a workload's Nth measured bind
// the probe prints the API writes kube-apiserver has served and the watch
// events it has sent since the workload's control plane started (the
// harness resets the metrics between workloads). Both profiles run the
// same setup, so a difference between their counts is the scheduler's.
// Counting is exact where CPU time on a shared machine is not. 0 (the
// default) prints nothing: gathering the metrics costs CPU in the window
// the benchmark measures.
var requestsAt = flag.Int("rota-bench-requests-at", 0, "at the Nth measured bind of each workload, print kube-apiserver's write requests and watch events so far")

// requestsLinePrefix starts each line printRequests writes:
// "rota-bench-requests <verb> <resource>[/<subresource>] <count>", and for
// watch events "rota-bench-requests WATCH-EVENTS <resource> <count>".
const requestsLinePrefix = "rota-bench-requests"

// printRequests writes kube-apiserver's write requests by verb and
// resource, and the watch events it sent by resource, from the process's
// metrics registry. Reads (GET, LIST, WATCH) are left out: the informers'
// initial lists and watches are the same in both profiles.
func printRequests(out io.Writer) {
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		fmt.Fprintf(out, "%s error %v\n", requestsLinePrefix, err)
		return
	}
	counts := map[string]float64{}
	for _, f := range families {
		switch f.GetName() {
		case "apiserver_request_total":
			for _, m := range f.GetMetric() {
				l := labels(m.GetLabel())
				switch l["verb"] {
				case "POST", "PUT", "PATCH", "APPLY", "DELETE", "DELETECOLLECTION":
				default:
					continue
				}
				res := l["resource"]
				if l["subresource"] != "" {
					res += "/" + l["subresource"]
				}
				counts[l["verb"]+" "+res] += m.GetCounter().GetValue()
			}
		case "apiserver_watch_events_total":
			for _, m := range f.GetMetric() {
				counts["WATCH-EVENTS "+labels(m.GetLabel())["resource"]] += m.GetCounter().GetValue()
			}
		}
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(out, "%s %s %.0f\n", requestsLinePrefix, k, counts[k])
	}
}

type labelPair interface {
	GetName() string
	GetValue() string
}

func labels[L labelPair](pairs []L) map[string]string {
	m := make(map[string]string, len(pairs))
	for _, p := range pairs {
		m[p.GetName()] = p.GetValue()
	}
	return m
}
