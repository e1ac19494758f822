package warmerctl

import (
	"github.com/charmbracelet/bubbles/progress"
	"github.com/muesli/termenv"
)

// Bars draws progress bars with the bubbles library: plain characters
// and no escape sequence for text that is not a terminal's (or under
// NO_COLOR), a colour gradient otherwise.
type Bars struct {
	overall, node progress.Model
}

// Widths of the bars, in cells.
const (
	overallBarWidth = 30
	nodeBarWidth    = 20
)

// NewBars returns plain bars, or coloured ones when color is true.
func NewBars(color bool) Bars {
	style := []progress.Option{progress.WithoutPercentage(), progress.WithColorProfile(termenv.Ascii), progress.WithFillCharacters('#', '.')}
	if color {
		style = []progress.Option{progress.WithoutPercentage(), progress.WithColorProfile(termenv.ANSI256), progress.WithDefaultGradient()}
	}
	return Bars{
		overall: progress.New(append(style, progress.WithWidth(overallBarWidth))...),
		node:    progress.New(append(style, progress.WithWidth(nodeBarWidth))...),
	}
}

// Overall is the ImageWarm's bar at fraction f.
func (b Bars) Overall(f float64) string { return "[" + b.overall.ViewAs(f) + "]" }

// Node is one node's bar at fraction f.
func (b Bars) Node(f float64) string { return "[" + b.node.ViewAs(f) + "]" }
