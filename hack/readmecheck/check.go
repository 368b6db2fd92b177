package main

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// notInCI are the README's targets CI cannot run, and why.
var notInCI = map[string]string{
	"push":       "needs a registry to push to",
	"update-k8s": "moves go.mod to another Kubernetes release (K8S=...)",
}

// readmeMake matches a make command in prose or a code block: `make demo`,
// `make release-manifests VERSION=...`, `make bin/kubectl`.
var readmeMake = regexp.MustCompile(`\bmake ([a-z][a-z0-9./-]*[a-z0-9])`)

// readmeTargets are the targets the README tells a person to run, in
// order of first mention.
func readmeTargets(readme string) []string {
	var out []string
	for _, m := range readmeMake.FindAllStringSubmatch(readme, -1) {
		if !slices.Contains(out, m[1]) {
			out = append(out, m[1])
		}
	}
	return out
}

// ruleLine matches a rule's first line, "a b: c d ## help", and not a
// variable assignment ("A := b", "A ?= b") or a recipe line (tab).
var ruleLine = regexp.MustCompile(`^([^\t#=:][^=:]*?):(?:[^=]|$)(.*)$`)

// parseMakefile maps each explicit target to its prerequisites (without
// the ones spelled with variables, which name files, not phony targets).
func parseMakefile(makefile string) map[string][]string {
	rules := map[string][]string{}
	for line := range strings.Lines(makefile) {
		line = strings.TrimRight(line, "\n")
		m := ruleLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		prereqs := m[2]
		if i := strings.Index(prereqs, "#"); i >= 0 {
			prereqs = prereqs[:i]
		}
		var deps []string
		for f := range strings.FieldsSeq(strings.ReplaceAll(prereqs, "|", " ")) {
			if !strings.Contains(f, "$") {
				deps = append(deps, f)
			}
		}
		for t := range strings.FieldsSeq(m[1]) {
			if t == ".PHONY" || strings.Contains(t, "$") || strings.Contains(t, "%") {
				continue
			}
			rules[t] = append(rules[t], deps...)
		}
	}
	return rules
}

// ciTargets are the targets of every `make` command in the CI script,
// outside comments.
func ciTargets(script string) []string {
	var out []string
	for line := range strings.Lines(script) {
		if i := strings.Index(line, "#"); i >= 0 {
			line = line[:i]
		}
		fields := strings.Fields(line)
		for i, f := range fields {
			if f != "make" {
				continue
			}
			for _, arg := range fields[i+1:] {
				if strings.ContainsAny(arg, "|;&<>()`") {
					break
				}
				if strings.HasPrefix(arg, "-") || strings.Contains(arg, "=") || strings.HasPrefix(arg, "\"") {
					continue
				}
				out = append(out, arg)
			}
		}
	}
	return out
}

// check returns one sentence per README target the Makefile lacks or CI
// does not reach.
func check(named []string, rules map[string][]string, ci []string) []string {
	reached := map[string]bool{}
	var visit func(string)
	visit = func(t string) {
		if reached[t] {
			return
		}
		reached[t] = true
		for _, d := range rules[t] {
			visit(d)
		}
	}
	for _, t := range ci {
		visit(t)
	}
	var problems []string
	for _, t := range named {
		_, defined := rules[t]
		switch {
		case !defined:
			problems = append(problems, fmt.Sprintf("names `make %s`, which the Makefile does not define", t))
		case reached[t]:
		case notInCI[t] != "":
		default:
			problems = append(problems, fmt.Sprintf("names `make %s`, which .ci/run does not run (neither directly nor as a prerequisite): add it to .ci/run, or to notInCI in hack/readmecheck with the reason", t))
		}
	}
	return problems
}
