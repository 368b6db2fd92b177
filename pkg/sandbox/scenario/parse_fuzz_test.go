package scenario

import (
	"cmp"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"sigs.k8s.io/yaml"
)

// FuzzParse feeds arbitrary bytes to the scenario parser, starting from the
// shipped scenarios. Whatever the bytes: no panic; a scenario it accepts is
// valid, its events are in time order, and written out and parsed again it
// is the same scenario.
//
//	make fuzz FUZZTIME=30s (or: go test ./pkg/sandbox/scenario -run '^$' -fuzz FuzzParse)
func FuzzParse(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("..", "..", "..", "examples", "scenarios", "*.yaml"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no shipped scenarios to start from: %v", err)
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("name: x\nstart: \"2026-10-19T09:00:00Z\"\nnodes: [{name: n1, profile: \"h100:2\"}]\nevents: [{at: 1d2h, fault: {node: n1, gpu: 1}}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		sc, err := Parse(data)
		if err != nil {
			return
		}
		if err := sc.Validate(); err != nil {
			t.Fatalf("Parse accepted an invalid scenario: %v", err)
		}
		if !slices.IsSortedFunc(sc.Events, func(a, b Event) int { return cmp.Compare(a.At, b.At) }) {
			t.Fatal("events are not in time order")
		}
		out, err := yaml.Marshal(sc)
		if err != nil {
			t.Fatalf("writing an accepted scenario: %v", err)
		}
		back, err := Parse(out)
		if err != nil {
			t.Fatalf("an accepted scenario written out does not parse again: %v\n%s", err, out)
		}
		again, err := yaml.Marshal(back)
		if err != nil {
			t.Fatal(err)
		}
		if string(again) != string(out) {
			t.Fatalf("a round trip changed the scenario:\n%s\nthen\n%s", out, again)
		}
	})
}
