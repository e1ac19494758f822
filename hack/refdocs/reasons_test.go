package main

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/warmer-dev/warmer/internal/vocabulary"
)

// TestEveryReasonListed parses every file of api/v1alpha1, not only the
// one reasons.md reads, so a condition type or reason declared elsewhere
// fails here rather than going unlisted.
func TestEveryReasonListed(t *testing.T) {
	var page bytes.Buffer
	if err := writeReasons(&page, "../.."); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("../../api/v1alpha1/*.go")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for name, value := range stringConsts(f) {
			if !vocabulary.Named(name) {
				continue
			}
			n++
			if !strings.Contains(page.String(), "| `"+value+"` |") && !strings.Contains(page.String(), "### `"+value+"`") {
				t.Errorf("%s (%s, in %s) is not listed in reasons.md", name, value, filepath.Base(path))
			}
		}
	}
	if n < 10 {
		t.Fatalf("found %d condition types and reasons; the walk is broken", n)
	}
}

func stringConsts(f *ast.File) map[string]string {
	out := map[string]string{}
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, s := range gd.Specs {
			vs := s.(*ast.ValueSpec)
			for i, id := range vs.Names {
				if i < len(vs.Values) {
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						out[id.Name], _ = strconv.Unquote(lit.Value)
					}
				}
			}
		}
	}
	return out
}

// TestEventKinds checks how a constructor's reason is read as Normal or
// Warning: a Warning field, or a true passed beside the reason, and
// nothing else (OnNode: true is not a warning).
func TestEventKinds(t *testing.T) {
	dir := t.TempDir()
	src := `package plan

func eventA() Event { return Event{OnNode: true, Reason: warmv1.ReasonA} }
func eventB() Event { return Event{Warning: true, Reason: warmv1.ReasonB} }
func eventC(w bool) Event {
	if w {
		return imageEvent(x, true, warmv1.ReasonC, "")
	}
	return imageEvent(x, false, warmv1.ReasonC, "")
}
func notAnEvent() Event { return Event{Reason: warmv1.ReasonD} }
`
	if err := os.WriteFile(filepath.Join(dir, "events.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := eventReasons(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"ReasonA": "Normal", "ReasonB": "Warning", "ReasonC": "Normal or Warning"}
	if len(got) != len(want) {
		t.Errorf("got reasons %v, want %v", keysOf(got), want)
	}
	for r, kind := range want {
		if u := got[r]; u == nil || u.kind() != kind {
			t.Errorf("%s: got %+v, want %s", r, u, kind)
		}
	}
}

func keysOf[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
