package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/warmer-dev/warmer/internal/vocabulary"
)

// Where reasons.md reads: the vocabulary and the agent's event
// constructors (their functions are named event...).
const (
	conditionsFile = "api/v1alpha1/conditions.go"
	eventsDir      = "controllers/agent/plan"
	// gateFile holds the warm gate's Pod condition and its reasons.
	gateFile = "controllers/gate/names.go"
)

// constGroup is one const declaration of conditions.go: its doc and its
// names, in order.
type constGroup = vocabulary.Group

type constDoc = vocabulary.Const

// eventUse is how the agent records one reason as an event.
type eventUse struct {
	warning, normal bool
	makers          []string
}

// writeReasons writes reasons.md: condition types and reasons as
// conditions.go groups them, then the reasons of the agent's events.
func writeReasons(w *bytes.Buffer, root string) error {
	groups, err := parseConsts(filepath.Join(root, conditionsFile))
	if err != nil {
		return err
	}
	events, err := eventReasons(filepath.Join(root, eventsDir))
	if err != nil {
		return err
	}
	values := map[string]constDoc{}
	for _, g := range groups {
		for _, c := range g.Consts {
			values[c.Ident] = c
		}
	}
	words := vocabulary.Replacer(groups, func(v string) string { return "`" + v + "`" })
	header(w, "Conditions, reasons and events", "For anyone who reads an ImageWarm's or NodeWarm's conditions, matches reasons in alerts or scripts, or reads `kubectl events`: every condition type and reason warmer sets, and the events the agent records.",
		conditionsFile+"'s constants and the agent's event constructors ("+eventsDir+")")
	w.WriteString("\n## Conditions and reasons\n\nA value never changes once released.\n\n")
	for _, g := range groups {
		writeGroup(w, g, words)
	}
	w.WriteString("\n## Events\n\nThe agent records these events on the ImageWarms that want an image (and some on the Node), as `events.k8s.io` Events.\n\n| Reason | Type | Meaning |\n|---|---|---|\n")
	idents := slices.Collect(mapKeys(events))
	for _, ident := range idents {
		if _, ok := values[ident]; !ok {
			return fmt.Errorf("%s records %s, which %s does not define", eventsDir, ident, conditionsFile)
		}
	}
	slices.SortFunc(idents, func(a, b string) int { return strings.Compare(values[a].Value, values[b].Value) })
	for _, ident := range idents {
		c := values[ident]
		fmt.Fprintf(w, "| `%s` | %s | %s |\n", c.Value, events[ident].kind(), cell(words.Replace(meaning(c))))
	}
	return writeGateReasons(w, root)
}

// writeGateReasons lists the reasons of the warm gate's Pod condition
// (docs/guides/warm-gate.md); each but Warm is also a Warning event.
func writeGateReasons(w *bytes.Buffer, root string) error {
	groups, err := parseConsts(filepath.Join(root, gateFile))
	if err != nil {
		return err
	}
	w.WriteString("\n## The warm gate's Pod condition\n\nThe controller sets the Pod condition `warmer.dev/Warm` when it removes the `warmer.dev/warm` scheduling gate ([guide](../guides/warm-gate.md)): True with reason `Warm`, else False with one of the others, which is also recorded as a Warning event on the Pod.\n\n| Reason | Meaning |\n|---|---|\n")
	for _, g := range groups {
		for _, c := range g.Consts {
			if strings.HasPrefix(c.Ident, "Reason") {
				fmt.Fprintf(w, "| `%s` | %s |\n", c.Value, cell(meaning(c)))
			}
		}
	}
	return nil
}

func (e *eventUse) kind() string {
	switch {
	case e.warning && e.normal:
		return "Normal or Warning"
	case e.warning:
		return "Warning"
	}
	return "Normal"
}

// writeGroup writes one declaration: a table under its doc, or for a
// single constant with a doc of its own, a paragraph.
func writeGroup(w *bytes.Buffer, g constGroup, words *strings.Replacer) {
	if len(g.Consts) == 1 && g.Doc == "" {
		c := g.Consts[0]
		fmt.Fprintf(w, "### `%s`\n\n%s\n\n", c.Value, words.Replace(oneLine(c.Doc)))
		return
	}
	title, more, _ := strings.Cut(words.Replace(oneLine(g.Doc)), ". ")
	fmt.Fprintf(w, "### %s\n\n", strings.TrimSuffix(title, "."))
	if more != "" {
		fmt.Fprintf(w, "%s\n\n", more)
	}
	w.WriteString("| Value | Meaning |\n|---|---|\n")
	for _, c := range g.Consts {
		fmt.Fprintf(w, "| `%s` | %s |\n", c.Value, cell(words.Replace(meaning(c))))
	}
	w.WriteString("\n")
}

// meaning is a constant's doc without the "ReasonX:" it opens with.
func meaning(c constDoc) string {
	return oneLine(strings.TrimPrefix(c.Doc, c.Ident+":"))
}

func oneLine(s string) string { return vocabulary.OneLine(s) }

// parseConsts reads the Condition and Reason constants of a file, grouped
// by declaration, with their doc comments.
func parseConsts(path string) ([]constGroup, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return vocabulary.Parse(path, src)
}
