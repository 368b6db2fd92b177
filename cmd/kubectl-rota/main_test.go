package main

import (
	"bytes"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// Colour only on a terminal: a pipe or buffer gets none unless asked for.
func TestColor(t *testing.T) {
	for mode, want := range map[string]bool{"auto": false, "always": true, "never": false} {
		o := &options{colorMode: mode, streams: genericiooptions.IOStreams{Out: &bytes.Buffer{}}}
		if got := o.color(); got != want {
			t.Errorf("--color=%s to a buffer: colour %v, want %v", mode, got, want)
		}
	}
	o := &options{colorMode: "sometimes", output: "", width: 100}
	if err := o.validate(); err == nil {
		t.Error("--color=sometimes accepted")
	}
	o = &options{colorMode: "auto", output: "yaml", width: 100}
	if err := o.validate(); err != nil {
		t.Errorf("-o yaml refused: %v", err)
	}
}

// The client's rate limits come from --kube-api-qps and --kube-api-burst
// (not client-go's 5 a second); a limit of zero is refused.
func TestKubeAPIRateFlags(t *testing.T) {
	for _, tc := range []struct {
		args      []string
		qps       float32
		burst     int
		wantError string
	}{
		{args: nil, qps: 50, burst: 100},
		{args: []string{"--kube-api-qps=200", "--kube-api-burst=400"}, qps: 200, burst: 400},
		{args: []string{"--kube-api-qps=0"}, wantError: "--kube-api-qps (0) must be above 0"},
		{args: []string{"--kube-api-burst=0"}, wantError: "--kube-api-burst (0) at least 1"},
	} {
		cmd, o := newRoot(genericiooptions.IOStreams{Out: &bytes.Buffer{}, ErrOut: &bytes.Buffer{}})
		if err := cmd.PersistentFlags().Parse(append([]string{"--server=https://127.0.0.1:6443"}, tc.args...)); err != nil {
			t.Fatal(err)
		}
		cfg, err := o.restConfig()
		if tc.wantError != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantError) {
				t.Errorf("%v: error %v, want %q", tc.args, err, tc.wantError)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if cfg.QPS != tc.qps || cfg.Burst != tc.burst {
			t.Errorf("%v: client QPS %g burst %d, want %g and %d", tc.args, cfg.QPS, cfg.Burst, tc.qps, tc.burst)
		}
	}
}
