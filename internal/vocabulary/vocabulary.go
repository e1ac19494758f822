// Package vocabulary reads warmer's condition types and reasons, with
// what each means and what to do, from the doc comments of
// api/v1alpha1/conditions.go: the one place they are written. The
// reference (hack/refdocs, reasons.md) and kubectl warmer's why both read
// them through here, so a reason is explained in one place only.
//
// A constant's doc opens with "ReasonX:" and says what it means; a
// sentence starting "What to do:" says what a person can do about it.
package vocabulary

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Group is one const declaration: its doc and its constants, in order.
type Group struct {
	Doc    string
	Consts []Const
}

// Const is one Condition or Reason constant.
type Const struct {
	// Ident is the Go name, Value the string users see, Doc the comment.
	Ident, Value, Doc string
}

// actionMark opens the part of a doc that says what to do.
const actionMark = "What to do:"

// Meaning is the doc on one line, without the "ReasonX:" it opens with
// and without what to do.
func (c Const) Meaning() string {
	m, _, _ := strings.Cut(OneLine(strings.TrimPrefix(c.Doc, c.Ident+":")), actionMark)
	return strings.TrimSpace(m)
}

// Action is what the doc says to do, "" when it says nothing.
func (c Const) Action() string {
	_, a, _ := strings.Cut(OneLine(c.Doc), actionMark)
	return strings.TrimSpace(a)
}

// OneLine joins a doc's lines and spaces.
func OneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

var exported = regexp.MustCompile(`^(Condition|Reason)`)

// Parse reads the Condition and Reason constants of a Go file's source,
// grouped by declaration, with their doc comments. name is for errors.
func Parse(name string, src []byte) ([]Group, error) {
	f, err := parser.ParseFile(token.NewFileSet(), name, src, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var groups []Group
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		g := Group{}
		if gd.Lparen.IsValid() {
			g.Doc = gd.Doc.Text()
		}
		for _, s := range gd.Specs {
			c, err := constOf(s.(*ast.ValueSpec), gd)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			if exported.MatchString(c.Ident) {
				g.Consts = append(g.Consts, c)
			}
		}
		if len(g.Consts) > 0 {
			groups = append(groups, g)
		}
	}
	return groups, nil
}

func constOf(vs *ast.ValueSpec, gd *ast.GenDecl) (Const, error) {
	if len(vs.Names) != 1 || len(vs.Values) != 1 {
		return Const{}, fmt.Errorf("want one name and one value a line at %s", vs.Names[0].Name)
	}
	c := Const{Ident: vs.Names[0].Name, Doc: vs.Doc.Text()}
	if !gd.Lparen.IsValid() {
		c.Doc = gd.Doc.Text()
	}
	lit, ok := vs.Values[0].(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return c, fmt.Errorf("%s: want a string literal", c.Ident)
	}
	c.Value, _ = strconv.Unquote(lit.Value)
	if strings.TrimSpace(c.Doc) == "" {
		return c, fmt.Errorf("%s has no doc comment to say what it means", c.Ident)
	}
	return c, nil
}

// Named reports whether a constant's Go name makes it part of the
// vocabulary (Condition... or Reason...).
func Named(ident string) bool { return exported.MatchString(ident) }

// Replacer replaces the Go names of the constants in docs with the
// values users see, each passed through wrap (e.g. to quote it).
func Replacer(groups []Group, wrap func(string) string) *strings.Replacer {
	var consts []Const
	for _, g := range groups {
		consts = append(consts, g.Consts...)
	}
	// Longest first: ReasonTaintRemovedElsewhere before ReasonTaintRemoved.
	slices.SortStableFunc(consts, func(a, b Const) int { return len(b.Ident) - len(a.Ident) })
	pairs := make([]string, 0, 2*len(consts))
	for _, c := range consts {
		pairs = append(pairs, c.Ident, wrap(c.Value))
	}
	return strings.NewReplacer(pairs...)
}
