// Package plugins_test holds the checks that span Rota's scheduler
// plugins.
package plugins_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// textMatchers are the strings functions that decide from a text's
// contents.
var textMatchers = map[string]bool{
	"Contains": true, "HasPrefix": true, "HasSuffix": true, "TrimPrefix": true,
	"TrimSuffix": true, "Index": true, "CutPrefix": true, "Cut": true, "EqualFold": true,
}

// statusText is what an expression that holds a status's or a
// condition's words looks like: st.Message(), st.Reasons(), c.Message, a
// variable msg.
var statusText = regexp.MustCompile(`(?i)message|reasons?\b|\bmsg\b|\.Conditions`)

// messageMatches lists, as "file:line: call", the calls in src that decide
// from the text of a status or a pod condition.
func messageMatches(t *testing.T, fset *token.FileSet, file *ast.File, src []byte) []string {
	t.Helper()
	var out []string
	ast.Inspect(file, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok || !textMatchers[sel.Sel.Name] {
			return true
		}
		if pkg, ok := sel.X.(*ast.Ident); !ok || pkg.Name != "strings" {
			return true
		}
		for _, arg := range call.Args {
			text := string(src[fset.Position(arg.Pos()).Offset:fset.Position(arg.End()).Offset])
			if statusText.MatchString(text) {
				code := string(src[fset.Position(call.Pos()).Offset:fset.Position(call.End()).Offset])
				out = append(out, fset.Position(call.Pos()).String()+": "+code)
				break
			}
		}
		return true
	})
	return out
}

// No plugin decides from the words of a status or a pod condition: a
// plugin that needs another's outcome reads the typed record it wrote
// (cyclestate.Refuse and RefusalOf, waits.Causes), so that rewording a
// message users read cannot change a wait reason or a turn.
func TestNoPluginReadsMessageText(t *testing.T) {
	fset := token.NewFileSet()
	var found []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		file, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		found = append(found, messageMatches(t, fset, file, src)...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		t.Errorf("decides from message text (record the outcome as data instead): %s", f)
	}
}

// The check finds what it is for: the text matching this package's
// plugins did before their outcomes were typed.
func TestMessageMatchesFindsTextMatching(t *testing.T) {
	src := []byte(`package p

import "strings"

func f(c cond, st status, msg string, model string) bool {
	a := strings.Contains(c.Message, "constraint conflict")
	b := strings.HasPrefix(msg, "ReservationNotMember: ")
	x := strings.TrimPrefix(strings.Join(st.Reasons(), "; "), "QuotaExceeded: ")
	ok := strings.HasPrefix(model, "H100")
	return a && b && x != "" && ok
}
`)
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := messageMatches(t, fset, file, src)
	if len(got) != 3 {
		t.Errorf("found %d calls, want the 3 that read message text:\n%s", len(got), strings.Join(got, "\n"))
	}
}
