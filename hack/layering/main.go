// Command layering checks who may import whom among Rota's packages (the
// rules in rules.go, drawn in docs/architecture.md) and exits 1 with every
// import that breaks one. `make lint` runs it over `go list -json ./...`;
// test packages are not checked: a test may reach across layers to set up
// what it needs.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
)

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "layering:", err)
		os.Exit(1)
	}
}

func run(w io.Writer) error {
	module, err := exec.Command("go", "list", "-m").Output()
	if err != nil {
		return fmt.Errorf("go list -m: %w", err)
	}
	out, err := exec.Command("go", "list", "-e", "-json=ImportPath,Imports", "./...").Output()
	if err != nil {
		return fmt.Errorf("go list ./...: %w", err)
	}
	pkgs, err := decode(out)
	if err != nil {
		return err
	}
	vs := check(string(bytes.TrimSpace(module)), pkgs)
	for _, v := range vs {
		fmt.Fprintln(w, v)
	}
	if len(vs) > 0 {
		return fmt.Errorf("%d import(s) break the package map in docs/architecture.md", len(vs))
	}
	fmt.Fprintf(w, "layering: %d packages, every import follows the package map\n", len(pkgs))
	return nil
}

// decode reads the stream of JSON objects `go list -json` prints.
func decode(b []byte) ([]pkg, error) {
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(b))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			return pkgs, nil
		} else if err != nil {
			return nil, fmt.Errorf("decoding go list output: %w", err)
		}
		pkgs = append(pkgs, p)
	}
}
