package main

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// parse reads the benchmark output into results by workload
// ("family/workload") and profile.
func parse(in io.Reader) (map[string]map[string]*result, error) {
	p := &parser{samples: map[string]map[string]*result{}, pending: map[int]int{}, reserved: map[string]int{}, requests: map[string]float64{}}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if err := p.line(sc.Text()); err != nil {
			return nil, err
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return p.samples, nil
}

// parser is the state of parse between lines.
type parser struct {
	// workload -> profile -> result
	samples map[string]map[string]*result
	// Tier lines come while a run is in progress; the run's throughput line
	// follows them, so the lines seen since the previous throughput line
	// belong to the run that reports next. (With -benchtime 1x, go test
	// prints a benchmark's name after its first run and before later ones.)
	pending map[int]int
	// usage of the same pending lines.
	usage usage
	// reserved states of the same pending lines.
	reserved map[string]int
	// requests are the request counts printed since the previous
	// throughput line.
	requests map[string]float64
	// go test prints a benchmark's name when it starts and its metrics when
	// it ends; with the scheduler's log in between, the metrics may come on
	// a line of their own. Attribute them to the last name seen.
	current string
}

// line takes in one line of output: a tier line, a benchmark's name, its
// throughput, or none of these.
func (p *parser) line(text string) error {
	fields := strings.Fields(text)
	if (len(fields) == 2 || len(fields) == 4 || len(fields) == 5) && fields[0] == tierLine {
		tier, _, _ := strings.Cut(fields[1], "/")
		n, err := strconv.Atoi(tier)
		if err != nil {
			return fmt.Errorf("bad tier line %q: %w", text, err)
		}
		p.pending[n]++
		if len(fields) == 5 {
			switch fields[4] {
			case "free", "tolerated", intruded:
				p.reserved[fields[4]]++
			default:
				return fmt.Errorf("bad reserved state in tier line %q", text)
			}
		}
		if len(fields) >= 4 {
			cpu, err := strconv.ParseInt(fields[2], 10, 64)
			if err != nil {
				return fmt.Errorf("bad CPU time in tier line %q: %w", text, err)
			}
			rss, err := strconv.ParseInt(fields[3], 10, 64)
			if err != nil {
				return fmt.Errorf("bad peak RSS in tier line %q: %w", text, err)
			}
			p.usage.add(cpu, rss)
		}
		return nil
	}
	if len(fields) == 4 && fields[0] == requestsLine {
		n, err := strconv.ParseFloat(fields[3], 64)
		if err != nil {
			return fmt.Errorf("bad count in request line %q: %w", text, err)
		}
		p.requests[fields[1]+" "+fields[2]] = n
		return nil
	}
	if len(fields) > 0 && strings.HasPrefix(fields[0], "BenchmarkPerfScheduling/") {
		p.current = fields[0]
	}
	for i := 1; i < len(fields); i++ {
		if fields[i] != metric || p.current == "" {
			continue
		}
		v, err := strconv.ParseFloat(fields[i-1], 64)
		if err != nil {
			return fmt.Errorf("%s: %w", p.current, err)
		}
		p.record(v)
	}
	return nil
}

// record adds a throughput of the current benchmark, with the tier lines
// pending, to its workload and profile.
func (p *parser) record(v float64) {
	family, profile, workload, ok := parseName(p.current)
	if !ok {
		return
	}
	key := family + "/" + workload
	if p.samples[key] == nil {
		p.samples[key] = map[string]*result{}
	}
	r := p.samples[key][profile]
	if r == nil {
		r = &result{tiers: map[int]int{}, reserved: map[string]int{}, requests: map[string][]float64{}}
		p.samples[key][profile] = r
	}
	r.throughput = append(r.throughput, v)
	for t, n := range p.pending {
		r.tiers[t] += n
	}
	clear(p.pending)
	for k, n := range p.reserved {
		r.reserved[k] += n
	}
	clear(p.reserved)
	if u := p.usage; u.lines >= 2 {
		r.cpuPerPod = append(r.cpuPerPod, float64(u.maxCPU-u.firstCPU)/float64(u.lines-1)/1e6)
	}
	r.peakRSS = max(r.peakRSS, p.usage.peakRSS)
	p.usage = usage{}
	if len(p.requests) > 0 {
		// A count a run did not print is 0 in that run: every run of a
		// profile then has an entry for every key any of its runs printed.
		runs := r.runsWithRequests()
		for k, n := range p.requests {
			if _, ok := r.requests[k]; !ok {
				r.requests[k] = make([]float64, runs)
			}
			r.requests[k] = append(r.requests[k], n)
		}
		for k, v := range r.requests {
			if len(v) == runs {
				r.requests[k] = append(v, 0)
			}
		}
		clear(p.requests)
	}
}

// runsWithRequests is how many runs of r printed request counts.
func (r *result) runsWithRequests() int {
	n := 0
	for _, v := range r.requests {
		n = max(n, len(v))
	}
	return n
}

// add takes in one tier line's process CPU time and peak RSS.
func (u *usage) add(cpu, rss int64) {
	if u.lines == 0 {
		u.firstCPU = cpu
	}
	u.lines++
	u.maxCPU = max(u.maxCPU, cpu)
	u.peakRSS = max(u.peakRSS, rss)
}

// parseName splits "BenchmarkPerfScheduling/MixedGPUsRota/500nodes_1000pods-2"
// into family "MixedGPUs", profile "Rota" and workload "500nodes_1000pods".
func parseName(name string) (family, profile, workload string, ok bool) {
	parts := strings.Split(name, "/")
	if len(parts) < 3 {
		return "", "", "", false
	}
	testCase, workload := parts[1], parts[2]
	if i := strings.LastIndex(workload, "-"); i > 0 {
		workload = workload[:i]
	}
	for _, p := range []string{"Stock", "Rota"} {
		if strings.HasSuffix(testCase, p) {
			return strings.TrimSuffix(testCase, p), p, workload, true
		}
	}
	return "", "", "", false
}
