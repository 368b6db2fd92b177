package main

import (
	"strings"
	"testing"
	"time"
)

// Bad flag combinations are refused with a message naming the flags.
func TestDefragFlags(t *testing.T) {
	tests := map[string]struct {
		f      defragFlags
		output string
		want   string
	}{
		"plan by default":          {f: defragFlags{dryRun: "none", timeout: time.Minute}},
		"plan as json":             {f: defragFlags{plan: true, dryRun: "none", timeout: time.Minute}, output: "json"},
		"apply":                    {f: defragFlags{apply: true, dryRun: "none", timeout: time.Minute}},
		"server dry run":           {f: defragFlags{dryRun: "server", timeout: time.Minute}},
		"plan and apply":           {f: defragFlags{plan: true, apply: true, dryRun: "none", timeout: time.Minute}, want: "--plan and --apply exclude each other"},
		"client dry run":           {f: defragFlags{dryRun: "client", timeout: time.Minute}, want: "--dry-run=client is what --plan does"},
		"unknown dry run":          {f: defragFlags{dryRun: "all", timeout: time.Minute}, want: `--dry-run "all" is not supported`},
		"plan with server dry run": {f: defragFlags{plan: true, dryRun: "server", timeout: time.Minute}, want: "use it without --plan"},
		"no timeout":               {f: defragFlags{apply: true, dryRun: "none"}, want: "--timeout 0s must be positive"},
		"json with apply":          {f: defragFlags{apply: true, dryRun: "none", timeout: time.Minute}, output: "json", want: "--output json is only for --plan"},
		"unknown output":           {f: defragFlags{dryRun: "none", timeout: time.Minute}, output: "wide", want: `--output "wide" is not supported`},
		"approved with apply":      {f: defragFlags{apply: true, dryRun: "none", approved: "plan.json", timeout: time.Minute}},
		"approved with plan":       {f: defragFlags{dryRun: "none", approved: "plan.json", timeout: time.Minute}, want: "--approved is for --apply or --dry-run=server"},
		"json with server dry run": {f: defragFlags{dryRun: "server", timeout: time.Minute}, output: "yaml", want: "only for --plan"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			o := &options{colorMode: "auto", width: 100, output: tc.output}
			err := tc.f.validate(o)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
