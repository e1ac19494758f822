package warmerctl

import (
	"fmt"
	"io"
	"strings"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/internal/bytesize"
)

// Screen is what the text is written for: a height to stay within and
// the bars to draw.
type Screen struct {
	// Lines is the height to stay within: the nodes past it are summed up
	// in one line.
	Lines int
	Bars  Bars
}

// DefaultLines is the height of a screen when the output is not a
// terminal's.
const DefaultLines = 24

// failureGroupsShown bounds the reasons status lists; why lists all.
const failureGroupsShown = 3

// RenderStatus writes s as text within sc.Lines lines: the overall bar,
// the failures by reason, then a bar per node not yet warm, slowest
// first, the rest summed up in one line.
func RenderStatus(w io.Writer, s Summary, sc Screen) error {
	var head, tail []string
	head = append(head, headline(s))
	head = append(head, fmt.Sprintf("%s %s", sc.Bars.Overall(nodeFraction(s)), overallLine(s)))
	if r := s.Rollout; r != nil && r.Waiting > 0 {
		head = append(head, fmt.Sprintf("rollout: %d admitted, %d waiting for their wave", r.Admitted, r.Waiting))
	}
	for i, g := range s.Failures {
		if i == failureGroupsShown {
			tail = append(tail, fmt.Sprintf("... and %s more; kubectl warmer why %s", count(len(s.Failures)-i, "reason"), s.Name))
			break
		}
		tail = append(tail, fmt.Sprintf("%s on %s: %s", g.Reason, count(len(g.Nodes), "node"), nodeList(g.Nodes)))
		if g.Message != "" {
			tail = append(tail, "  "+g.Message)
		}
		if t := g.nextTry(); t != "" {
			tail = append(tail, "  "+t)
		}
	}
	if n := s.Nodes.NotReporting; n > 0 {
		tail = append(tail, fmt.Sprintf("not reporting: %s: %s", count(int(n), "node"), nodeList(silentNames(s.Silent))))
	}
	room := sc.Lines - len(head) - len(tail)
	if len(tail) > 0 {
		room-- // the blank line before the tail
	}
	rows := nodeRows(s, sc, room)
	out := append(head, rows...)
	if len(tail) > 0 {
		out = append(out, "")
		out = append(out, tail...)
	}
	_, err := io.WriteString(w, strings.Join(out, "\n")+"\n")
	return err
}

// nodeRows is one row per node not yet warm within room lines, the last
// summing up the rest.
func nodeRows(s Summary, sc Screen, room int) []string {
	if len(s.Working) == 0 {
		return nil
	}
	room = max(room, 3)
	width := 0
	for _, n := range s.Working[:min(len(s.Working), room)] {
		width = max(width, len(n.Node))
	}
	rows := []string{""}
	shown := len(s.Working)
	if shown > room-1 {
		shown = room - 2
	}
	for _, n := range s.Working[:shown] {
		rows = append(rows, nodeRow(n, width, sc.Bars))
	}
	if rest := s.Working[shown:]; len(rest) > 0 {
		rows = append(rows, restLine(rest))
	}
	return rows
}

func nodeRow(n NodeProgress, width int, bars Bars) string {
	row := fmt.Sprintf("%-*s %s %-9s", width, n.Node, bars.Node(n.Bytes.Fraction()), n.Phase)
	if n.Bytes.Total > 0 {
		row += fmt.Sprintf(" %s of %s", bytesize.IEC(n.Bytes.Done), bytesize.IEC(n.Bytes.Total))
	} else {
		row += fmt.Sprintf(" %d of %d images", n.Present, n.Images)
	}
	if n.PullPhase == warmv1.PullPhaseUnpacking {
		row += ", unpacking" // the bytes are in; the rate is the download's
	} else if r := n.Rate(); r > 0 {
		row += fmt.Sprintf(", %s/s", bytesize.IEC(r))
	}
	if n.SecondsLeft != nil {
		row += ", " + shortDuration(*n.SecondsLeft) + " left"
	}
	if n.DiskPressure != "" {
		row += ", DiskPressure " + n.DiskPressure
	}
	return strings.TrimRight(row, " ")
}

// restLine sums up the nodes past the screen by phase.
func restLine(rest []NodeProgress) string {
	byPhase := map[Phase]int{}
	var b Bytes
	for _, n := range rest {
		byPhase[n.Phase]++
		b.Done += n.Bytes.Done
		b.Total += n.Bytes.Total
	}
	var parts []string
	for _, p := range phases {
		if c := byPhase[p]; c > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c, strings.ToLower(string(p))))
		}
	}
	line := fmt.Sprintf("... and %d more nodes: %s", len(rest), strings.Join(parts, ", "))
	if b.Total > 0 {
		line += fmt.Sprintf("; %s left", bytesize.IEC(b.Left()))
	}
	return line
}

func headline(s Summary) string {
	state := "Ready"
	if !s.Ready {
		state = "not Ready"
		if s.ReadyReason != "" {
			state += " (" + s.ReadyReason + ")"
		}
	}
	line := fmt.Sprintf("ImageWarm %s/%s: %s; %d of %d images on every node", s.Namespace, s.Name, state, s.ReadyImages, s.Images)
	if s.ServedStarts > 0 {
		line += fmt.Sprintf("; %d starts served warm in the last day", s.ServedStarts)
	}
	return line
}

func overallLine(s Summary) string {
	n := s.Nodes
	line := fmt.Sprintf("%d of %d nodes warm", n.Ready, n.Matching)
	for _, c := range []struct {
		n    int32
		what string
	}{{n.Pulling, "pulling"}, {n.Failed, "failed"}, {n.NotReporting, "not reporting"}, {n.Unsupported, "unsupported"}, {n.Unlisted, "unlisted"}} {
		if c.n > 0 {
			line += fmt.Sprintf(", %d %s", c.n, c.what)
		}
	}
	if s.Bytes.Total > 0 {
		line += "; " + bytesLine(s.Bytes, s.SecondsLeft)
	}
	return line
}

func bytesLine(b Bytes, secondsLeft *int64) string {
	line := fmt.Sprintf("%s of %s (%d%%)", bytesize.IEC(b.Done), bytesize.IEC(b.Total), int(b.Fraction()*100))
	if secondsLeft != nil {
		line += ", " + shortDuration(*secondsLeft) + " left"
	}
	return line
}

func nodeFraction(s Summary) float64 {
	if s.Nodes.Matching <= 0 {
		return 0
	}
	return min(float64(s.Nodes.Ready)/float64(s.Nodes.Matching), 1)
}

// nodeList names the first few nodes, and how many more.
func nodeList(nodes []string) string {
	few := firstFew(nodes)
	out := strings.Join(few, ", ")
	if more := len(nodes) - len(few); more > 0 {
		out += fmt.Sprintf(" and %d more", more)
	}
	return out
}

// shortDuration writes seconds as 45s, 2m05s or 1h02m.
func shortDuration(secs int64) string {
	switch {
	case secs < 60:
		return fmt.Sprintf("%ds", secs)
	case secs < 3600:
		return fmt.Sprintf("%dm%02ds", secs/60, secs%60)
	}
	return fmt.Sprintf("%dh%02dm", secs/3600, secs%3600/60)
}
