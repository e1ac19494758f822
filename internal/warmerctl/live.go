package warmerctl

import (
	"io"
	"strings"

	tea "github.com/charmbracelet/bubbletea"
)

// live is the terminal view of status --watch: bubbletea redraws the
// frame RenderStatus writes, with coloured bars, on every change; it
// quits at Ready, at the timeout, or on q or Ctrl-C.
type live struct {
	summary Summary
	have    bool
	lines   int
	bars    Bars
	end     endReason
}

type endReason int

const (
	endNone endReason = iota
	endReady
	endTimeout
	endInterrupted
)

// summaryMsg is a new Summary; timeoutMsg says the time is up.
type (
	summaryMsg Summary
	timeoutMsg struct{}
)

var _ tea.Model = live{}

func (m live) Init() tea.Cmd { return nil }

func (m live) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case summaryMsg:
		m.summary, m.have = Summary(msg), true
		if m.summary.Ready {
			m.end = endReady
			return m, tea.Quit
		}
	case timeoutMsg:
		m.end = endTimeout
		return m, tea.Quit
	case tea.WindowSizeMsg:
		m.lines = msg.Height
	case tea.KeyMsg:
		if s := msg.String(); s == "q" || s == "ctrl+c" {
			m.end = endInterrupted
			return m, tea.Quit
		}
	}
	return m, nil
}

func (m live) View() string {
	if !m.have {
		return "waiting for the first report...\n"
	}
	var b strings.Builder
	// One line short of the screen: the cursor's line after the frame.
	_ = RenderStatus(&b, m.summary, Screen{Lines: max(m.lines-1, 6), Bars: m.bars})
	return b.String()
}

// runLive shows summaries from updates in a terminal until Ready, a
// timeout (a value on timeout) or the user quits.
func runLive(in io.Reader, out io.Writer, lines int, updates <-chan Summary, timeout <-chan struct{}) (endReason, error) {
	p := tea.NewProgram(live{lines: lines, bars: NewBars(true)}, tea.WithInput(in), tea.WithOutput(out))
	go func() {
		for {
			select {
			case s, ok := <-updates:
				if !ok {
					return
				}
				p.Send(summaryMsg(s))
			case <-timeout:
				p.Send(timeoutMsg{})
				return
			}
		}
	}()
	final, err := p.Run()
	if err != nil {
		return endNone, err
	}
	return final.(live).end, nil
}
