package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// metricRoles says which process registers the metrics each package
// defines. A package that defines metrics and is missing here stops the
// generator, so a new one is placed on purpose.
var metricRoles = map[string]string{
	"controllers/agent":     "agent",
	"pkg/pullengine":        "agent",
	"pkg/credprovider":      "agent",
	"controllers/imagewarm": "controller",
}

// metric is one Prometheus metric as its definition spells it.
type metric struct {
	Name, Type, Help string
	Labels           []string
	Pkg              string
}

// writeMetrics writes metrics.md: every metric warmer defines, by role.
func writeMetrics(w *bytes.Buffer, root string) error {
	ms, err := findMetrics(root)
	if err != nil {
		return err
	}
	header(w, "Metrics", "For operators who scrape and alert on warmer: every metric the agent and the controller serve on /metrics, with its type and labels.",
		"the prometheus.New… definitions in the code")
	w.WriteString("\nBoth roles also serve controller-runtime's own metrics (`controller_runtime_*`, `workqueue_*`, `rest_client_*`) and the Go and process collectors'.\n")
	for _, r := range []string{"agent", "controller"} {
		fmt.Fprintf(w, "\n## warmer %s\n\n| Metric | Type | Labels | Meaning |\n|---|---|---|---|\n", r)
		for _, m := range ms {
			if metricRoles[m.Pkg] != r {
				continue
			}
			labels := make([]string, len(m.Labels))
			for i, l := range m.Labels {
				labels[i] = code(l)
			}
			fmt.Fprintf(w, "| `%s` | %s | %s | %s |\n", m.Name, m.Type, strings.Join(labels, ", "), cell(m.Help))
		}
	}
	return nil
}

// findMetrics parses every non-test Go file of the module outside test/
// and hack/ and returns the metrics they define, by package and then in
// source order.
func findMetrics(root string) ([]metric, error) {
	var out []metric
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if rel == "test" || rel == "hack" || strings.HasPrefix(d.Name(), ".") && rel != "." {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ms, err := metricsIn(fset, f)
		for i := range ms {
			ms[i].Pkg = filepath.ToSlash(filepath.Dir(rel))
			if _, ok := metricRoles[ms[i].Pkg]; !ok {
				return fmt.Errorf("%s defines %s: add its package to metricRoles in hack/refdocs", rel, ms[i].Name)
			}
		}
		out = append(out, ms...)
		return err
	})
	slices.SortStableFunc(out, func(a, b metric) int { return strings.Compare(a.Pkg, b.Pkg) })
	return out, err
}

// metricsIn finds the prometheus.NewCounter (Gauge, Histogram, Summary,
// and their Vec forms) calls of one file. Their options must be literals:
// a name or help built at run time would not be documented here.
func metricsIn(fset *token.FileSet, f *ast.File) ([]metric, error) {
	var out []metric
	var err error
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || err != nil {
			return err == nil
		}
		typ, vec, ok := metricConstructor(call.Fun)
		if !ok {
			return true
		}
		var m metric
		m, err = metricOf(call, typ, vec)
		if err != nil {
			err = fmt.Errorf("%s: %w", fset.Position(call.Pos()), err)
			return false
		}
		out = append(out, m)
		return true
	})
	return out, err
}

// metricConstructor recognises prometheus.New<Type>[Vec].
func metricConstructor(fun ast.Expr) (typ string, vec, ok bool) {
	sel, isSel := fun.(*ast.SelectorExpr)
	if !isSel {
		return "", false, false
	}
	if pkg, isIdent := sel.X.(*ast.Ident); !isIdent || pkg.Name != "prometheus" {
		return "", false, false
	}
	name, vec := strings.CutSuffix(sel.Sel.Name, "Vec")
	switch name {
	case "NewCounter", "NewGauge", "NewHistogram", "NewSummary":
		return strings.ToLower(strings.TrimPrefix(name, "New")), vec, true
	}
	return "", false, false
}

func metricOf(call *ast.CallExpr, typ string, vec bool) (metric, error) {
	m := metric{Type: typ}
	opts, ok := call.Args[0].(*ast.CompositeLit)
	if !ok {
		return m, fmt.Errorf("the options of a prometheus.New call must be a literal")
	}
	for _, e := range opts.Elts {
		kv, ok := e.(*ast.KeyValueExpr)
		if !ok {
			return m, fmt.Errorf("the options of a prometheus.New call must name their fields")
		}
		key := kv.Key.(*ast.Ident).Name
		switch key {
		case "Name", "Help":
			s, err := stringLit(kv.Value)
			if err != nil {
				return m, fmt.Errorf("%s: %w", key, err)
			}
			if key == "Name" {
				m.Name = s
			} else {
				m.Help = s
			}
		case "Namespace", "Subsystem", "ConstLabels":
			return m, fmt.Errorf("%s is not documented by hack/refdocs: spell the whole name in Name", key)
		}
	}
	if vec {
		labels, ok := call.Args[1].(*ast.CompositeLit)
		if !ok {
			return m, fmt.Errorf("%s: the label names must be a []string literal", m.Name)
		}
		for _, l := range labels.Elts {
			s, err := stringLit(l)
			if err != nil {
				return m, fmt.Errorf("%s: label: %w", m.Name, err)
			}
			m.Labels = append(m.Labels, s)
		}
	}
	if m.Name == "" || m.Help == "" {
		return m, fmt.Errorf("a metric needs a Name and a Help")
	}
	return m, nil
}

// stringLit is the value of a string literal, or of literals joined by +.
func stringLit(e ast.Expr) (string, error) {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind == token.STRING {
			return strconv.Unquote(e.Value)
		}
	case *ast.BinaryExpr:
		if e.Op == token.ADD {
			a, err := stringLit(e.X)
			if err != nil {
				return "", err
			}
			b, err := stringLit(e.Y)
			return a + b, err
		}
	}
	return "", fmt.Errorf("want a string literal, got %T", e)
}
