package app

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const weekWorkloads = "../../../examples/forecast-week-workloads.yaml"

var weekRange = []string{"--from", "2026-10-19T00:00:00+07:00", "--to", "2026-10-26T00:00:00+07:00"}

func forecastJSON(t *testing.T, args ...string) []map[string]any {
	t.Helper()
	code, stdout, stderr := run(t, append(append([]string{"forecast", "--output", "json"}, weekRange...), args...)...)
	if code != 0 {
		t.Fatalf("exit status %d, stderr:\n%s", code, stderr)
	}
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		out = append(out, rec)
	}
	return out
}

func ofType(recs []map[string]any, typ string) []map[string]any {
	var out []map[string]any
	for _, r := range recs {
		if r["type"] == typ {
			out = append(out, r)
		}
	}
	return out
}

// TestForecastWeekFits is the week-swap scenario
// (docs/design.md#scenario-week-swap) on one node of 10 H100s, as the
// driver publishes a mock h100:10 node: demand peaks at exactly 10.
func TestForecastWeekFits(t *testing.T) {
	recs := forecastJSON(t, "--file", weekFile, "--file", weekWorkloads, "--node", "gpu-node-0=h100:10")
	if oc := ofType(recs, "overcommit"); len(oc) != 0 {
		t.Fatalf("over-commits %v, want none", oc)
	}
	peak := 0.0
	for _, r := range ofType(recs, "capacity") {
		if r["model"] != "H100" || r["capacity"] != 10.0 {
			t.Errorf("record %v, want H100 of capacity 10", r)
		}
		peak = max(peak, r["demand"].(float64))
	}
	if peak != 10 {
		t.Errorf("peak demand %v, want 10", peak)
	}
}

// TestForecastThirdTarget adds sdxl (4 GPUs) to business hours: the
// over-committed windows are those a count by hand gives (see
// pkg/schedule/forecast's TestThirdTargetOvercommitsBusinessHours).
func TestForecastThirdTarget(t *testing.T) {
	dir := t.TempDir()
	week, err := os.ReadFile(weekFile)
	if err != nil {
		t.Fatal(err)
	}
	sched := strings.Replace(string(week), "  windows:\n", `  - name: sdxl
    workloadRef: {apiVersion: apps/v1, kind: Deployment, name: md-sdxl}
    defaultState: Stopped
  windows:
`, 1)
	sched = strings.Replace(sched, "    - {target: qwen32b, desiredState: Stopped}\n", "    - {target: qwen32b, desiredState: Stopped}\n    - {target: sdxl, desiredState: Running}\n", 1)
	sdxl := `apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: sdxl-gpus, namespace: serving}
spec: {spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu.rota.dev, count: 4}}]}}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: md-sdxl, namespace: serving}
spec:
  replicas: 0
  selector: {matchLabels: {app: md-sdxl}}
  template:
    metadata: {labels: {app: md-sdxl}}
    spec:
      resourceClaims: [{name: gpu, resourceClaimTemplateName: sdxl-gpus}]
      containers: [{name: main, image: pause}]
`
	write(t, filepath.Join(dir, "week.yaml"), sched)
	write(t, filepath.Join(dir, "sdxl.yaml"), sdxl)
	recs := forecastJSON(t, "--file", filepath.Join(dir, "week.yaml"), "--file", weekWorkloads, "--file", filepath.Join(dir, "sdxl.yaml"), "--node", "gpu-node-0=h100:10")
	var got []string
	for _, r := range ofType(recs, "overcommit") {
		b, _ := json.Marshal([]any{r["from"], r["to"], r["demand"], r["capacity"], r["reason"], r["targets"]})
		got = append(got, string(b))
	}
	day := `["serving/gpu-pool-h100-shared/llama70b","serving/gpu-pool-h100-shared/sdxl"]`
	want := []string{
		`["2026-10-19T08:00:00+07:00","2026-10-19T18:00:00+07:00",14,10,"count",` + day + `]`,
		`["2026-10-20T08:00:00+07:00","2026-10-20T18:00:00+07:00",14,10,"count",` + day + `]`,
		`["2026-10-21T08:00:00+07:00","2026-10-21T13:00:00+07:00",14,10,"count",` + day + `]`,
		`["2026-10-21T13:00:00+07:00","2026-10-21T15:00:00+07:00",12,10,"count",["serving/gpu-pool-h100-shared/qwen32b","serving/gpu-pool-h100-shared/sdxl"]]`,
		`["2026-10-21T15:00:00+07:00","2026-10-21T18:00:00+07:00",14,10,"count",` + day + `]`,
		`["2026-10-22T08:00:00+07:00","2026-10-22T18:00:00+07:00",14,10,"count",` + day + `]`,
		`["2026-10-23T08:00:00+07:00","2026-10-23T18:00:00+07:00",14,10,"count",` + day + `]`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("over-commits:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestForecastFragmentation: two dgx-h100 nodes with 2 GPUs of each held by
// a reservation leave 12 GPUs by count, 6 per node; llama70b's 8-GPU
// replica fits on neither.
func TestForecastFragmentation(t *testing.T) {
	dir := t.TempDir()
	res := ""
	for _, node := range []string{"node-a", "node-b"} {
		res += `apiVersion: rota.dev/v1alpha1
kind: GPUReservation
metadata: {name: hold-` + node + `, namespace: other}
spec:
  nodeName: ` + node + `
  count: 2
  members: [{name: m, workloadRef: {apiVersion: apps/v1, kind: Deployment, name: batch}}]
---
`
	}
	write(t, filepath.Join(dir, "res.yaml"), res)
	recs := forecastJSON(t, "--file", weekFile, "--file", weekWorkloads, "--file", filepath.Join(dir, "res.yaml"),
		"--node", "node-a=dgx-h100", "--node", "node-b=dgx-h100")
	oc := ofType(recs, "overcommit")
	if len(oc) == 0 {
		t.Fatal("no over-commit, want llama70b's business hours by fragmentation")
	}
	for _, r := range oc {
		// llama70b 8 + bge 2 = 10 of 12: fits by count.
		if r["reason"] != "fragmentation" || r["demand"] != 10.0 || r["capacity"] != 12.0 {
			t.Errorf("%v, want 10 of 12 by fragmentation", r)
		}
		if d, _ := r["detail"].(string); !strings.Contains(d, "serving/gpu-pool-h100-shared/llama70b (8 GPUs)") {
			t.Errorf("detail %q does not name llama70b's 8-GPU pod", d)
		}
	}
}

func TestForecastBadInput(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	write(t, bad, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec: {replicass: 1}\n")
	for name, tc := range map[string]struct {
		args []string
		want []string
	}{
		"profile": {[]string{"--file", weekFile, "--node", "n=h999:8", "--node", "nameless"},
			[]string{`--node: Invalid value: "n=h999:8"`, `unknown GPU kind "h999"`, `--node: Invalid value: "nameless": want NAME=PROFILE`}},
		"documents": {[]string{"--file", bad, "--node", "n=h100:8"},
			[]string{"bad.yaml: document 1: kind: Unsupported value: \"ConfigMap\"", `bad.yaml: document 2: unknown field "spec.replicass"`}},
		"range": {[]string{"--file", weekFile, "--node", "n=h100:8", "--from", "monday", "--output", "svg"},
			[]string{`--from: Invalid value: "monday"`, `--output: Unsupported value: "svg"`}},
	} {
		t.Run(name, func(t *testing.T) {
			code, stdout, stderr := run(t, append([]string{"forecast"}, tc.args...)...)
			if code != 1 || stdout != "" {
				t.Errorf("exit %d, stdout %q; want 1 and nothing", code, stdout)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
		})
	}
}

func TestForecastHTML(t *testing.T) {
	code, stdout, stderr := run(t, append([]string{"forecast", "--output", "html", "--file", weekFile, "--file", weekWorkloads, "--node", "gpu-node-0=h100:10"}, weekRange...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.HasPrefix(stdout, "<!DOCTYPE html>") || !strings.Contains(stdout, `data-model="H100"`) || strings.Contains(stdout, `class="overcommit"`) {
		t.Errorf("page is not the forecast of a week that fits:\n%.400s", stdout)
	}
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestForecastWarnings: with no consent to downtime on llama70b and a
// Service selecting it, every weekday's 18:00 stop will be AliasBlocked
// (Wednesday 13:00 has maint-wed's consent); with a quota of 9 GPUs in the
// namespace, every start of llama70b (8, beside bge's 2) will be
// QuotaRefused: the five mornings and Wednesday 15:00.
func TestForecastWarnings(t *testing.T) {
	dir := t.TempDir()
	week, err := os.ReadFile(weekFile)
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "week.yaml"), strings.Replace(string(week), "defaultAllowDowntime: true", "defaultAllowDowntime: false", 1))
	write(t, filepath.Join(dir, "extra.yaml"), `apiVersion: v1
kind: Service
metadata: {name: chat, namespace: serving}
spec: {selector: {app: md-llama70b}, ports: [{port: 80}]}
---
apiVersion: v1
kind: ResourceQuota
metadata: {name: gpus, namespace: serving}
spec: {hard: {gpu.rota.dev.deviceclass.resource.k8s.io/devices: "9"}}
`)
	recs := forecastJSON(t, "--file", filepath.Join(dir, "week.yaml"), "--file", weekWorkloads, "--file", filepath.Join(dir, "extra.yaml"), "--node", "gpu-node-0=h100:10")
	var got []string
	for _, r := range ofType(recs, "warning") {
		got = append(got, r["reason"].(string)+" "+r["target"].(string)+" "+r["at"].(string))
	}
	var want []string
	for day := 19; day <= 23; day++ {
		want = append(want, "QuotaRefused llama70b 2026-10-"+itoa(day)+"T08:00:00+07:00")
		if day == 21 {
			want = append(want, "QuotaRefused llama70b 2026-10-21T15:00:00+07:00")
		}
		want = append(want, "AliasBlocked llama70b 2026-10-"+itoa(day)+"T18:00:00+07:00")
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	msg := ofType(recs, "warning")[0]["message"].(string)
	if !strings.Contains(msg, "10 of gpu.rota.dev.deviceclass.resource.k8s.io/devices in ResourceQuota gpus (hard 9)") {
		t.Errorf("quota message %q lacks the numbers", msg)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestForecastPerNode: on two dgx-h100 nodes bge, which no schedule
// touches, stays on node-a; qwen32b joins it at night (2 + 6), llama70b
// needs a whole node by day and gets node-b.
func TestForecastPerNode(t *testing.T) {
	recs := forecastJSON(t, "--file", weekFile, "--file", weekWorkloads, "--node", "node-a=dgx-h100", "--node", "node-b=dgx-h100")
	perNode := map[string][]string{}
	for _, r := range ofType(recs, "node") {
		if r["capacity"] != 8.0 {
			t.Errorf("%v: capacity, want 8", r)
		}
		perNode[r["node"].(string)] = append(perNode[r["node"].(string)], fmt.Sprintf("%s %v", r["from"].(string)[8:16], r["demand"]))
	}
	wantA, wantB := []string{"19T00:00 8"}, []string{"19T00:00 0"}
	for _, d := range []string{"19", "20", "21", "22", "23"} {
		wantA, wantB = append(wantA, d+"T08:00 2"), append(wantB, d+"T08:00 8")
		if d == "21" {
			wantA, wantB = append(wantA, "21T13:00 8", "21T15:00 2"), append(wantB, "21T13:00 0", "21T15:00 8")
		}
		wantA, wantB = append(wantA, d+"T18:00 8"), append(wantB, d+"T18:00 0")
	}
	for node, want := range map[string][]string{"node-a": wantA, "node-b": wantB} {
		if got := strings.Join(perNode[node], ","); got != strings.Join(want, ",") {
			t.Errorf("%s:\n%s\nwant\n%s", node, got, strings.Join(want, ","))
		}
	}
	if oc := ofType(recs, "overcommit"); len(oc) != 0 {
		t.Errorf("over-commits %v, want none", oc)
	}
}
