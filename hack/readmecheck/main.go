// Command readmecheck keeps the README and CI from drifting apart: every
// `make TARGET` the README names must be a target of the Makefile, and CI
// (.ci/run) must run it, directly or as a prerequisite of a target it runs,
// unless it is listed in notInCI with the reason CI cannot run it. `make
// lint` runs it; it exits 1 with one line per broken rule.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
)

func main() {
	readme := flag.String("readme", "README.md", "The README whose `make` commands are checked.")
	makefile := flag.String("makefile", "Makefile", "The Makefile that must define them.")
	ci := flag.String("ci", ".ci/run", "The CI script that must run them.")
	flag.Parse()
	if err := run(os.Stdout, *readme, *makefile, *ci); err != nil {
		fmt.Fprintln(os.Stderr, "readmecheck:", err)
		os.Exit(1)
	}
}

func run(w io.Writer, readmePath, makefilePath, ciPath string) error {
	var texts [3]string
	for i, p := range []string{readmePath, makefilePath, ciPath} {
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		texts[i] = string(b)
	}
	named := readmeTargets(texts[0])
	problems := check(named, parseMakefile(texts[1]), ciTargets(texts[2]))
	for _, p := range problems {
		fmt.Fprintf(w, "%s: %s\n", readmePath, p)
	}
	if len(problems) > 0 {
		return fmt.Errorf("%d README command(s) the Makefile lacks or CI does not run", len(problems))
	}
	fmt.Fprintf(w, "readmecheck: the %d make targets %s names are defined and run by %s\n", len(named), readmePath, ciPath)
	return nil
}
