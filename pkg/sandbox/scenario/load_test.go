package scenario

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestShippedScenariosLoad(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "..", "examples", "scenarios", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no shipped scenarios: %v", err)
	}
	for _, f := range files {
		if _, err := Load(f); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func TestParseReportsFieldPaths(t *testing.T) {
	const head = `name: x
start: "2026-10-19T09:00:00+07:00"
nodes: [{name: n1, profile: "h100:2"}]
`
	tests := map[string]struct {
		yaml string
		want []string
	}{
		"plugin args not an object": {
			yaml: head + "schedulerPluginArgs: {Quota: [1]}\n",
			want: []string{"schedulerPluginArgs.Quota: Invalid value"},
		},
		"unknown wait reason": {
			yaml: head + `events:
- at: 1m
  checkpoint: {name: c, expect: {pods: [{name: a/b, waitReason: Fragmented}]}}
`,
			want: []string{`events[0].checkpoint.expect.pods[0].waitReason: Unsupported value: "Fragmented"`},
		},
		"min ready": {
			yaml: head + `events:
- at: 1m
  checkpoint: {name: c, expect: {minReady: [{workload: llama, count: 0}]}}
`,
			want: []string{
				`events[0].checkpoint.expect.minReady[0].workload: Invalid value: "llama"`,
				"events[0].checkpoint.expect.minReady[0].count: Invalid value: 0",
			},
		},
		"annotations and events": {
			yaml: head + `events:
- at: 1m
  checkpoint:
    name: c
    expect:
      pods: [{name: a/b, annotations: {"rota.dev/": x, rota.dev/borrowed: "[H100"}}]
      events: [{pod: b-7, reason: ""}]
      quotas: [{name: team-b/x, guaranteesFit: "false"}]
`,
			want: []string{
				`events[0].checkpoint.expect.pods[0].annotations[rota.dev/]: Invalid value: "rota.dev/"`,
				`events[0].checkpoint.expect.pods[0].annotations[rota.dev/borrowed]: Invalid value: "[H100"`,
				`events[0].checkpoint.expect.events[0].pod: Invalid value: "b-7": want namespace/name`,
				"events[0].checkpoint.expect.events[0].reason: Required value",
				`events[0].checkpoint.expect.quotas[0].name: Invalid value: "team-b/x"`,
				`events[0].checkpoint.expect.quotas[0].guaranteesFit: Unsupported value: "false"`,
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml))
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestParseAcceptsNewFields(t *testing.T) {
	sc, err := Parse([]byte(`name: x
start: "2026-10-19T09:00:00+07:00"
nodes: [{name: n1, profile: "h100:2"}]
schedulerPluginArgs:
  Quota: {tenants: [{namespace: team-a, limits: {H100: 2}}]}
events:
- at: 1m
  checkpoint:
    name: c
    expect:
      pods: [{name: team-b/b-*, waitReason: TopologyFragmentation}]
      minReady: [{workload: serving/md-llama70b, count: 1}]
      events: [{pod: team-b/b-7, reason: Checkpoint, messageContains: acknowledged}]
`))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := sc.SchedulerPluginArgs["Quota"].(map[string]any); !ok {
		t.Errorf("schedulerPluginArgs.Quota = %#v", sc.SchedulerPluginArgs["Quota"])
	}
	exp := sc.Events[0].Checkpoint.Expect
	if exp.Pods[0].WaitReason != "TopologyFragmentation" || exp.MinReady[0].Count != 1 || exp.Events[0].Reason != "Checkpoint" {
		t.Errorf("expect = %+v", exp)
	}
}
