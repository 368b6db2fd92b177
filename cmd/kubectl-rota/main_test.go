package main

import (
	"bytes"
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
