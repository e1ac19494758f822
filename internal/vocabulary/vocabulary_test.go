package vocabulary

import "testing"

func TestParse(t *testing.T) {
	src := []byte(`package x

// Reasons of something.
const (
	// ReasonA: it broke. What to do: fix it,
	// then wait.
	ReasonA = "A"
	// ReasonB: it waits.
	ReasonB = "B"
	// notExported is left out.
	notExported = "n"
)

// ReasonC is alone.
const ReasonC = "C"
`)
	groups, err := Parse("x.go", src)
	if err != nil {
		t.Fatal(err)
	}
	if len(groups) != 2 || len(groups[0].Consts) != 2 || groups[0].Doc != "Reasons of something.\n" {
		t.Fatalf("groups %+v", groups)
	}
	a, b, c := groups[0].Consts[0], groups[0].Consts[1], groups[1].Consts[0]
	if a.Value != "A" || a.Meaning() != "it broke." || a.Action() != "fix it, then wait." {
		t.Errorf("A: %q, meaning %q, action %q", a.Value, a.Meaning(), a.Action())
	}
	if b.Meaning() != "it waits." || b.Action() != "" {
		t.Errorf("B: meaning %q, action %q", b.Meaning(), b.Action())
	}
	if c.Doc != "ReasonC is alone.\n" {
		t.Errorf("C: doc %q", c.Doc)
	}
	if got := Replacer(groups, func(v string) string { return "`" + v + "`" }).Replace("ReasonA or ReasonB"); got != "`A` or `B`" {
		t.Errorf("replaced: %q", got)
	}
	if _, err := Parse("y.go", []byte("package y\nconst ReasonD = \"D\"\n")); err == nil {
		t.Error("a reason without a doc comment was accepted")
	}
}
