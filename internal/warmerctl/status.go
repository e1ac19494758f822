package warmerctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
)

// statusOptions are status's own flags.
type statusOptions struct {
	*options
	watch   bool
	timeout time.Duration
}

// plainEvery is how often status --watch writes a line when it is not
// drawing a terminal: at most once a second, and only on a change.
const plainEvery = time.Second

func newStatusCommand(o *options) *cobra.Command {
	so := &statusOptions{options: o}
	cmd := &cobra.Command{
		Use:   "status NAME",
		Short: "Show an ImageWarm's progress: nodes warm, bytes and time left, the slowest nodes, failures by reason",
		Long: "Show an ImageWarm's progress. With --watch, follow it until it is Ready (exit 0) or\n" +
			"--timeout passes (exit 1), like kubectl wait: live bars on a terminal, one line per\n" +
			"change otherwise.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.checkOutput(); err != nil {
				return err
			}
			if so.watch {
				return so.follow(cmd.Context(), args[0])
			}
			s, err := o.summary(cmd, args[0])
			if err != nil {
				return err
			}
			return o.print(s, func(out io.Writer) error { return RenderStatus(out, s, o.screen()) })
		},
	}
	o.addOutputFlag(cmd)
	cmd.Flags().BoolVarP(&so.watch, "watch", "w", false, "Follow the ImageWarm until it is Ready (exit 0) or the timeout (exit 1).")
	cmd.Flags().DurationVar(&so.timeout, "timeout", 0, "With --watch, how long to wait for Ready; 0 waits for ever.")
	return cmd
}

// errTimeout is status --watch's failure when Ready does not come.
var errTimeout = errors.New("timed out")

// follow watches name until it is Ready, the timeout or an interrupt.
func (so *statusOptions) follow(ctx context.Context, name string) error {
	r, ns, err := so.reader()
	if err != nil {
		return err
	}
	// The ImageWarm must be there: a name mistyped fails at once, as
	// kubectl wait does.
	if _, err := r.ImageWarm(ctx, ns, name); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	timeout := make(chan struct{})
	if so.timeout > 0 {
		t := time.AfterFunc(so.timeout, func() { close(timeout) })
		defer t.Stop()
	}
	f := r.Follow(ctx, ns, name)
	updates := make(chan Summary, 1)
	go summarise(ctx, f, updates)
	if h := so.terminal(); h > 0 && so.output == "" {
		return so.endLive(ns, name, updates, timeout, h)
	}
	return so.followPlain(ns, name, updates, timeout)
}

// summarise sends a Summary on each change once both lists arrived,
// dropping one the reader has not taken for the newer one.
func summarise(ctx context.Context, f *Follower, updates chan Summary) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-f.Changed():
		}
		if !f.Synced() {
			continue
		}
		iw, nws := f.Snapshot()
		if iw == nil {
			continue
		}
		s := Summarise(iw, nws)
		select {
		case <-updates:
		default:
		}
		updates <- s
	}
}

func (so *statusOptions) endLive(ns, name string, updates <-chan Summary, timeout <-chan struct{}, lines int) error {
	end, err := runLive(so.io.In, so.io.Out, lines, updates, timeout)
	if err != nil {
		return err
	}
	return so.ending(ns, name, end)
}

func (so *statusOptions) ending(ns, name string, end endReason) error {
	switch end {
	case endReady:
		return nil
	case endTimeout:
		return fmt.Errorf("%w waiting for ImageWarm %s/%s to be Ready; kubectl warmer why %s says what holds it", errTimeout, ns, name, name)
	}
	return fmt.Errorf("interrupted before ImageWarm %s/%s was Ready", ns, name)
}

// followPlain writes one line per change, at most once a second, then
// the whole status (or its JSON or YAML) at the end.
func (so *statusOptions) followPlain(ns, name string, updates <-chan Summary, timeout <-chan struct{}) error {
	var last Summary
	var lastLine string
	tick := time.NewTicker(plainEvery)
	defer tick.Stop()
	end := endNone
	for end == endNone {
		select {
		case last = <-updates:
			if last.Ready {
				end = endReady
			}
		case <-timeout:
			end = endTimeout
		case <-tick.C:
			if line := overallLine(last); last.Name != "" && line != lastLine && so.output == "" {
				fmt.Fprintln(so.io.Out, line)
				lastLine = line
			}
		}
	}
	if last.Name != "" {
		if err := so.print(last, func(out io.Writer) error { return RenderStatus(out, last, so.screen()) }); err != nil {
			return err
		}
	}
	return so.ending(ns, name, end)
}
