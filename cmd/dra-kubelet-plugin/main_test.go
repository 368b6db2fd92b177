package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// TestNoDriverExitsWithOneLine: without a driver and without --mock-profile
// the plugin exits 1 with one clear line, for serving and for discover.
func TestNoDriverExitsWithOneLine(t *testing.T) {
	if _, err := os.Stat("/proc/driver/nvidia/version"); err == nil {
		t.Skip("this machine has an NVIDIA driver")
	}
	for _, args := range [][]string{
		{"--node-name", "n1", "--http-address", "", "--metrics-address", ""},
		{"discover", "--node-name", "n1"},
	} {
		var stderr bytes.Buffer
		if code := realMain(args, &stderr); code != 1 {
			t.Errorf("%v: exit %d, want 1", args, code)
		}
		lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
		if len(lines) != 1 || !strings.HasPrefix(lines[0], "dra-kubelet-plugin: NVIDIA driver not found") {
			t.Errorf("%v: stderr = %q, want one line starting with the cause", args, stderr.String())
		}
	}
}

func TestUnknownArgument(t *testing.T) {
	var stderr bytes.Buffer
	if code := realMain([]string{"--node-name", "n", "--mock-profile", "l4x2", "extra"}, &stderr); code != 1 ||
		!strings.Contains(stderr.String(), `unexpected arguments ["extra"]`) {
		t.Errorf("exit %d, stderr %q", code, stderr.String())
	}
}
