package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTimelineInvalidInput checks the error contract: exit status 1, every error
// with its field path on stderr, nothing on stdout.
func TestTimelineInvalidInput(t *testing.T) {
	week, err := os.ReadFile(weekFile)
	if err != nil {
		t.Fatal(err)
	}
	edit := func(old, new string) string { return strings.Replace(string(week), old, new, 1) }
	testCases := map[string]struct {
		file       string // file content; empty means the week example unchanged
		args       []string
		wantStderr []string
	}{
		"invalid schedule": {
			file: edit(`cron: "0 8 * * 1-5", duration: 10h`, `cron: "0 0 8 * * 1-5", duration: 10 hours`),
			wantStderr: []string{
				`spec.windows[0].recurring.cron: Invalid value: "0 0 8 * * 1-5"`,
				`spec.windows[0].recurring.duration: Invalid value: "10 hours"`,
			},
		},
		"replicas zero and an undeclared target": {
			file: edit(`{target: qwen32b, desiredState: Running}`, `{target: qwen, desiredState: Running, replicas: 0}`),
			wantStderr: []string{
				`spec.windows[1].states[1].target: Invalid value: "qwen"`,
				`spec.windows[1].states[1].replicas: Invalid value: 0`,
			},
		},
		"unknown fields are errors": {
			file:       edit(`timeZone: Asia/Ho_Chi_Minh`, "timeZone: Asia/Ho_Chi_Minh\n  timezone: UTC"),
			wantStderr: []string{`unknown field "spec.timezone"`},
		},
		"equal-priority overlap found in the range names both windows": {
			file: edit("priority: 100", "priority: 10"),
			wantStderr: []string{
				`spec.windows[1]: Invalid value: "maint-wed": windows "business-hours" (spec.windows[0]) and "maint-wed" (spec.windows[1]) have the same priority 10`,
			},
		},
		"wrong kind": {
			file:       edit("kind: DeploySchedule", "kind: GPUReservation"),
			wantStderr: []string{`kind: Unsupported value: "GPUReservation"`},
		},
		"two documents": {
			file:       string(week) + "\n---\n" + string(week),
			wantStderr: []string{"the file holds 2 YAML documents"},
		},
		"bad flags": {
			args: []string{"--from", "monday", "--to", "2026-10-26T00:00:00+07:00", "--output", "yaml"},
			wantStderr: []string{
				`--from: Invalid value: "monday"`,
				`--output: Unsupported value: "yaml"`,
			},
		},
		"empty range": {
			args:       []string{"--from", "2026-10-26T00:00:00+07:00", "--to", "2026-10-19T00:00:00+07:00"},
			wantStderr: []string{`--to: Invalid value: "2026-10-19T00:00:00+07:00": must be after --from`},
		},
		"missing file": {
			file:       "-",
			wantStderr: []string{"reading schedule: open"},
		},
		"missing flags": {
			args:       []string{},
			wantStderr: []string{`required flag(s) "from", "to" not set`},
		},
	}
	for name, tc := range testCases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "schedule.yaml")
			switch tc.file {
			case "":
				path = weekFile
			case "-":
			default:
				if err := os.WriteFile(path, []byte(tc.file), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			args := tc.args
			if args == nil {
				args = []string{"--from", "2026-10-19T00:00:00+07:00", "--to", "2026-10-26T00:00:00+07:00", "-o", "json"}
			}
			code, stdout, stderr := run(t, append([]string{"timeline", "--file", path}, args...)...)
			if code == 0 {
				t.Errorf("exit status 0, want non-zero")
			}
			if stdout != "" {
				t.Errorf("stdout = %q, want nothing", stdout)
			}
			for _, want := range tc.wantStderr {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr lacks %q:\n%s", want, stderr)
				}
			}
		})
	}
}

func TestRootAndVersion(t *testing.T) {
	testCases := map[string]struct {
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		"version":                      {args: []string{"version"}, wantStdout: "Rota "},
		"help says what is here today": {args: []string{}, wantStdout: "run the controllers against a cluster"},
		"unknown command":              {args: []string{"start"}, wantCode: 1, wantStderr: `unknown command "start"`},
		"run without a cluster": {args: []string{"run", "--kubeconfig", "/nonexistent/kubeconfig", "--metrics-bind-address", "", "--health-probe-bind-address", ""},
			wantCode: 1, wantStderr: "client configuration"},
	}
	for name, tc := range testCases {
		t.Run(name, func(t *testing.T) {
			code, stdout, stderr := run(t, tc.args...)
			if code != tc.wantCode {
				t.Errorf("exit status %d, want %d (stderr %q)", code, tc.wantCode, stderr)
			}
			if !strings.Contains(stdout, tc.wantStdout) || !strings.Contains(stderr, tc.wantStderr) {
				t.Errorf("stdout %q / stderr %q, want them to contain %q / %q", stdout, stderr, tc.wantStdout, tc.wantStderr)
			}
		})
	}
}
