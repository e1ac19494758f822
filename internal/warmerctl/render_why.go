package warmerctl

import (
	"fmt"
	"io"
	"strings"
)

// RenderWhy writes w as text: one line when Ready, else each finding
// with its nodes, the message, what it means and what to do.
func RenderWhy(out io.Writer, w Why) error {
	var b strings.Builder
	if w.Ready {
		fmt.Fprintf(&b, "ImageWarm %s/%s is Ready: every node it counts has every image.\n", w.Namespace, w.Name)
		_, err := io.WriteString(out, b.String())
		return err
	}
	fmt.Fprintf(&b, "ImageWarm %s/%s is not Ready:\n", w.Namespace, w.Name)
	for _, f := range w.Findings {
		fmt.Fprintf(&b, "\n* %s\n", f.Summary)
		if len(f.Nodes) > 0 {
			fmt.Fprintf(&b, "  nodes: %s\n", nodeList(f.Nodes))
		}
		if f.Message != "" {
			fmt.Fprintf(&b, "  said: %s\n", f.Message)
		}
		if f.Meaning != "" {
			fmt.Fprintf(&b, "  means: %s\n", f.Meaning)
		}
		if f.Action != "" {
			fmt.Fprintf(&b, "  to do: %s\n", f.Action)
		}
	}
	_, err := io.WriteString(out, b.String())
	return err
}
