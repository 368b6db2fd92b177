package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const testMakefile = `GO ?= go
TOOLS := bin/tools
.PHONY: build
build: bin/a bin/b ## Build.
bin/a bin/b: FORCE
	go build
test: build $(TOOLS)/gotestsum ## Test.
	gotestsum
generate: $(TOOLS)/controller-gen
verify-generate: generate
push:
demo: ## Demo.
	hack/demo.sh
`

const testCI = `#!/usr/bin/env bash
# make lint is not run here
make verify-generate
make test
make demo | tee log
CHAOS=1 make -s chaos-small CHAOS_KILLS=5
`

func TestCheck(t *testing.T) {
	rules := parseMakefile(testMakefile)
	ci := ciTargets(testCI)
	if want := []string{"verify-generate", "test", "demo", "chaos-small"}; !slices.Equal(ci, want) {
		t.Fatalf("ciTargets = %q, want %q", ci, want)
	}
	for _, tc := range []struct {
		readme string
		want   []string // substrings, one per problem
	}{
		{readme: "Run `make demo`, then `make test`.", want: nil},
		{readme: "`make build` and `make generate` come with make test.", want: nil},
		{readme: "`make push REGISTRY=x` is exempt.", want: nil},
		{readme: "`make bin/a` builds a.", want: nil},
		{readme: "`make bin/zz` builds zz.", want: []string{"`make bin/zz`, which the Makefile does not define"}},
		{readme: "Try `make frobnicate`.", want: []string{"`make frobnicate`, which the Makefile does not define"}},
		{readme: "`make lint` checks style.", want: []string{"`make lint`, which the Makefile does not define"}},
		{readme: "make demo; make test-race", want: []string{"`make test-race`, which the Makefile does not define"}},
	} {
		got := check(readmeTargets(tc.readme), rules, ci)
		if len(got) != len(tc.want) {
			t.Errorf("README %q: problems %q, want %d", tc.readme, got, len(tc.want))
			continue
		}
		for i, w := range tc.want {
			if !strings.Contains(got[i], w) {
				t.Errorf("README %q: problem %q, want it to contain %q", tc.readme, got[i], w)
			}
		}
	}
}

func TestDefinedButNotInCI(t *testing.T) {
	rules := parseMakefile(testMakefile + "bench: ## Bench.\n\tgo test -bench .\n")
	got := check([]string{"bench"}, rules, ciTargets(testCI))
	if len(got) != 1 || !strings.Contains(got[0], ".ci/run does not run") {
		t.Fatalf("problems %q, want one saying CI does not run make bench", got)
	}
}

func TestMakefileParse(t *testing.T) {
	rules := parseMakefile(testMakefile)
	for _, notTarget := range []string{"GO ?", "TOOLS", "GO", "\tgo build"} {
		if _, ok := rules[notTarget]; ok {
			t.Errorf("%q parsed as a target", notTarget)
		}
	}
	if got := rules["test"]; !slices.Equal(got, []string{"build"}) {
		t.Errorf("test's prerequisites = %q, want [build]", got)
	}
	if _, ok := rules["bin/a"]; !ok {
		t.Error("bin/a: not parsed as a target")
	}
}

// TestRepository runs the check on the repository's own README, Makefile
// and CI script, and once more with a made-up target added to the README.
func TestRepository(t *testing.T) {
	root := filepath.Join("..", "..")
	readme, makefile, ci := filepath.Join(root, "README.md"), filepath.Join(root, "Makefile"), filepath.Join(root, ".ci", "run")
	var out strings.Builder
	if err := run(&out, readme, makefile, ci); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	b, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	madeUp := filepath.Join(t.TempDir(), "README.md")
	if err := os.WriteFile(madeUp, append(b, "\nThen `make frobnicate-the-cluster`.\n"...), 0o600); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := run(&out, madeUp, makefile, ci); err == nil || !strings.Contains(out.String(), "make frobnicate-the-cluster") {
		t.Fatalf("a README naming a target the Makefile lacks passed: err %v, output %q", err, out.String())
	}
}
