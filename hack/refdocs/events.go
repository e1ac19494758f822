package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
)

// eventReasons finds the Reason constants the event constructors of dir
// (functions named event...) use, and whether as Normal or Warning: an
// Event literal with Warning: true, or a call passing true beside the
// reason (imageEvent(w, true, reason, note)).
func eventReasons(dir string) (map[string]*eventUse, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	out := map[string]*eventUse{}
	fset := token.NewFileSet()
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if ok && fd.Recv == nil && strings.HasPrefix(fd.Name.Name, "event") && fd.Body != nil {
				usesIn(fd, out)
			}
		}
	}
	return out, nil
}

// usesIn records the reasons one constructor passes, by the literal or
// call that carries each.
func usesIn(fd *ast.FuncDecl, out map[string]*eventUse) {
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		var args []ast.Expr
		switch n := n.(type) {
		case *ast.CompositeLit:
			args = n.Elts
		case *ast.CallExpr:
			args = n.Args
		default:
			return true
		}
		reason, warning := "", false
		for _, a := range args {
			if kv, ok := a.(*ast.KeyValueExpr); ok {
				if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "Warning" {
					warning = isTrue(kv.Value)
				}
				a = kv.Value
			} else {
				warning = warning || isTrue(a)
			}
			if sel, ok := a.(*ast.SelectorExpr); ok && strings.HasPrefix(sel.Sel.Name, "Reason") {
				reason = sel.Sel.Name
			}
		}
		if reason == "" {
			return true
		}
		u := out[reason]
		if u == nil {
			u = &eventUse{}
			out[reason] = u
		}
		u.warning = u.warning || warning
		u.normal = u.normal || !warning
		u.makers = append(u.makers, fd.Name.Name)
		return true
	})
}

func isTrue(e ast.Expr) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == "true"
}
