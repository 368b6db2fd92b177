package v1alpha1_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// contractLiteral matches what only this package may spell: the driver's
// domain, and a key in Rota's rota.dev/ namespace (annotation, label, taint,
// condition, finalizer).
var contractLiteral = regexp.MustCompile(`gpu\.rota\.dev|(^|[^.\w])rota\.dev/`)

// TestContractStringsLiveHere fails when Rota's code outside pkg/apis spells
// a contract string as a literal instead of naming this package's constant.
// Tests and test data may spell them: they check the wire format.
func TestContractStringsLiveHere(t *testing.T) {
	root := filepath.Join("..", "..", "..", "..")
	var found []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			switch {
			case rel == "pkg/apis", rel == "bin", rel == "testdata", strings.HasPrefix(d.Name(), ".") && rel != ".":
				return filepath.SkipDir
			case d.Name() == "testdata":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			v, err := strconv.Unquote(lit.Value)
			if err == nil && contractLiteral.MatchString(v) {
				found = append(found, fset.Position(lit.Pos()).String()+": "+lit.Value)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) == 0 {
		return
	}
	t.Errorf("contract strings spelled outside pkg/apis/gpu/v1alpha1 (use its constants):\n%s", strings.Join(found, "\n"))
}

// TestContractMatcherCatchesALiteral keeps the walk above honest: the
// pattern must see the strings it exists to find.
func TestContractMatcherCatchesALiteral(t *testing.T) {
	for _, s := range []string{"gpu.rota.dev", "rota.dev/reserved", `device.driver == "gpu.rota.dev"`, "rota.dev/tier"} {
		if !contractLiteral.MatchString(s) {
			t.Errorf("%q not matched", s)
		}
	}
	for _, s := range []string{"reservation.rota.dev", "rota.dev", "https://example.com/rota.dev"} {
		if contractLiteral.MatchString(s) {
			t.Errorf("%q matched", s)
		}
	}
}
