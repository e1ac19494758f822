package warmerctl

import (
	"fmt"
	"io"
	"strings"

	"github.com/warmer-dev/warmer/internal/bytesize"
)

// RenderNode writes r as text: the node's counts and conditions, then
// each image with its state, pin, verification and the ImageWarms that
// want it.
func RenderNode(out io.Writer, r NodeReport, bars Bars) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Node %s: %d of %d images present, %d pulling, %d failed; %d starts served warm in the last day\n",
		r.Node, r.Present, r.Desired, r.Pulling, r.Failed, r.ServedStarts)
	if r.Runtime.Name != "" {
		fmt.Fprintf(&b, "runtime: %s %s\n", r.Runtime.Name, r.Runtime.Version)
	}
	if fs := r.ImageFilesystem; fs != nil && fs.CapacityBytes > 0 {
		fmt.Fprintf(&b, "image filesystem: %d%% used (%s of images)\n", fs.UsedPercent, bytesize.IEC(fs.UsedBytes))
	}
	for _, c := range r.Conditions {
		fmt.Fprintf(&b, "condition %s=%s (%s)\n", c.Type, c.Status, c.Reason)
	}
	for _, w := range r.Warms {
		fmt.Fprintf(&b, "wanted by %s/%s: %d starts served warm\n", w.Namespace, w.Name, w.ServedStarts)
	}
	for _, img := range r.Images {
		b.WriteString("\n" + imageLine(img, bars))
	}
	_, err := io.WriteString(out, b.String()+"\n")
	return err
}

func imageLine(img NodeImage, bars Bars) string {
	line := fmt.Sprintf("%s  %s", img.Image, img.State)
	var marks []string
	for _, m := range []struct {
		on   bool
		word string
	}{{img.Pinned, "pinned"}, {img.Verified, "verified"}} {
		if m.on {
			marks = append(marks, m.word)
		}
	}
	if img.SecretsNamespace != "" {
		marks = append(marks, "secrets of "+img.SecretsNamespace)
	}
	if len(marks) > 0 {
		line += " (" + strings.Join(marks, ", ") + ")"
	}
	if p := img.Progress; p != nil {
		by := Bytes{Done: p.BytesDone, Total: p.BytesTotal}
		line += fmt.Sprintf("\n  %s %s", bars.Node(by.Fraction()), bytesLine(by, p.SecondsLeft))
	}
	if img.Reason != "" {
		line += fmt.Sprintf("\n  %s after %s: %s", img.Reason, count(int(img.Attempts), "attempt"), img.Message)
	}
	if len(img.WantedBy) > 0 {
		line += "\n  for " + strings.Join(img.WantedBy, ", ")
	}
	return line
}
