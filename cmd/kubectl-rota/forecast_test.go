package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// Bad flags are refused with what is wrong before any cluster is read.
func TestForecastFlags(t *testing.T) {
	for args, want := range map[string]string{
		"forecast -o yaml":       `--output "yaml" is not supported by forecast: use table, json or html`,
		"forecast --from monday": `--from "monday" is not an RFC 3339 time`,
		"forecast --from 2026-10-26T00:00:00Z --to 2026-10-19T00:00:00Z": "--to 2026-10-19T00:00:00Z must be after --from 2026-10-26T00:00:00Z",
	} {
		var out, errOut bytes.Buffer
		cmd := newRootCommand(genericiooptions.IOStreams{Out: &out, ErrOut: &errOut})
		cmd.SetArgs(append(strings.Fields(args), "--kubeconfig", "/nonexistent"))
		err := cmd.ExecuteContext(context.Background())
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("kubectl rota %s: %v, want %q", args, err, want)
		}
		if out.Len() != 0 {
			t.Errorf("kubectl rota %s printed %q", args, out.String())
		}
	}
}
