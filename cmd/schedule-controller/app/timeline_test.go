package app

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const (
	weekFile         = "../../../examples/deployschedule-week.yaml"
	multiReplicaFile = "../../../examples/deployschedule-multireplica.yaml"
)

func run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = Run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// TestTimelineJSON runs the command in-process on the multi-replica example and checks
// every line byte for byte: field names, order and null replicas are the contract.
func TestTimelineJSON(t *testing.T) {
	code, stdout, stderr := run(t, "timeline", "--file", multiReplicaFile,
		"--from", "2026-10-19T00:00:00+07:00", "--to", "2026-10-20T00:00:00+07:00", "--output", "json")
	if code != 0 {
		t.Fatalf("exit status %d, stderr:\n%s", code, stderr)
	}
	want := []string{
		`{"type":"interval","target":"llama70b","start":"2026-10-19T00:00:00+07:00","end":"2026-10-19T08:00:00+07:00","state":"Running","replicas":1,"allowDowntime":false,"source":"default"}`,
		`{"type":"interval","target":"qwen-8gpu","start":"2026-10-19T00:00:00+07:00","end":"2026-10-19T08:00:00+07:00","state":"Running","replicas":null,"allowDowntime":false,"source":"default"}`,
		`{"type":"interval","target":"llama70b","start":"2026-10-19T08:00:00+07:00","end":"2026-10-19T18:00:00+07:00","state":"Running","replicas":2,"allowDowntime":false,"source":"business-hours"}`,
		`{"type":"interval","target":"qwen-8gpu","start":"2026-10-19T08:00:00+07:00","end":"2026-10-19T18:00:00+07:00","state":"Stopped","replicas":null,"allowDowntime":false,"source":"business-hours"}`,
		`{"type":"interval","target":"llama70b","start":"2026-10-19T18:00:00+07:00","end":"2026-10-20T00:00:00+07:00","state":"Running","replicas":1,"allowDowntime":false,"source":"default"}`,
		`{"type":"interval","target":"qwen-8gpu","start":"2026-10-19T18:00:00+07:00","end":"2026-10-20T00:00:00+07:00","state":"Running","replicas":null,"allowDowntime":false,"source":"default"}`,
		`{"type":"transition","at":"2026-10-19T08:00:00+07:00","steps":[{"target":"qwen-8gpu","action":"Stop","replicas":null},{"target":"llama70b","action":"Scale","replicas":2}]}`,
		`{"type":"transition","at":"2026-10-19T18:00:00+07:00","steps":[{"target":"llama70b","action":"Scale","replicas":1},{"target":"qwen-8gpu","action":"Start","replicas":null}]}`,
	}
	if diff := cmp.Diff(want, strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")); diff != "" {
		t.Errorf("stdout lines (-want +got):\n%s", diff)
	}
	if stderr != "" {
		t.Errorf("stderr = %q, want nothing", stderr)
	}
}

// TestTimelineJSONWeek checks the week-swap week through the command: 12 transitions,
// the Wednesday maintenance among them, and intervals that tile the range.
func TestTimelineJSONWeek(t *testing.T) {
	code, stdout, stderr := run(t, "timeline", "-f", weekFile,
		"--from", "2026-10-19T00:00:00+07:00", "--to", "2026-10-26T00:00:00+07:00", "-o", "json")
	if code != 0 {
		t.Fatalf("exit status %d, stderr:\n%s", code, stderr)
	}
	type line struct {
		Type, Target, Start, End, At, Source string
	}
	var intervals, transitions []line
	for _, raw := range strings.Split(strings.TrimSuffix(stdout, "\n"), "\n") {
		var l line
		if err := json.Unmarshal([]byte(raw), &l); err != nil {
			t.Fatalf("line %q is not JSON: %v", raw, err)
		}
		if l.Type == "interval" {
			intervals = append(intervals, l)
		} else {
			transitions = append(transitions, l)
		}
	}
	var ats []string
	for _, tr := range transitions {
		ats = append(ats, tr.At[:16])
	}
	wantAts := []string{
		"2026-10-19T08:00", "2026-10-19T18:00", "2026-10-20T08:00", "2026-10-20T18:00",
		"2026-10-21T08:00", "2026-10-21T13:00", "2026-10-21T15:00", "2026-10-21T18:00",
		"2026-10-22T08:00", "2026-10-22T18:00", "2026-10-23T08:00", "2026-10-23T18:00",
	}
	if diff := cmp.Diff(wantAts, ats); diff != "" {
		t.Errorf("transition instants (-want +got):\n%s", diff)
	}
	wantMaint := `{"type":"transition","at":"2026-10-21T13:00:00+07:00","steps":[{"target":"llama70b","action":"Stop","replicas":null},{"target":"qwen32b","action":"Start","replicas":null}]}`
	if !strings.Contains(stdout, wantMaint+"\n") {
		t.Errorf("stdout lacks the maintenance transition %s", wantMaint)
	}
	end := map[string]string{"llama70b": "2026-10-19T00:00:00+07:00", "qwen32b": "2026-10-19T00:00:00+07:00"}
	for _, iv := range intervals {
		if iv.Start != end[iv.Target] {
			t.Errorf("interval %+v does not start where the previous one of %s ended (%s)", iv, iv.Target, end[iv.Target])
		}
		end[iv.Target] = iv.End
	}
	for target, e := range end {
		if e != "2026-10-26T00:00:00+07:00" {
			t.Errorf("intervals of %s end at %s, want the end of the range", target, e)
		}
	}
}

func TestTimelineTable(t *testing.T) {
	code, stdout, stderr := run(t, "timeline", "--file", weekFile,
		"--from", "2026-10-21T12:00:00+07:00", "--to", "2026-10-21T16:00:00+07:00")
	if code != 0 {
		t.Fatalf("exit status %d, stderr:\n%s", code, stderr)
	}
	for _, want := range []string{
		"DeploySchedule serving/gpu-pool-h100-shared in Asia/Ho_Chi_Minh",
		"Wed 2026-10-21 13:00 +07  Wed 2026-10-21 15:00 +07  llama70b  Stopped  -         yes             maint-wed       Stop\n",
		"Wed 2026-10-21 13:00 +07  1. Stop llama70b  2. Start qwen32b\n",
		"Wed 2026-10-21 15:00 +07  1. Stop qwen32b  2. Start llama70b\n",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("table lacks %q:\n%s", want, stdout)
		}
	}
}
