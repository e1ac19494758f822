package warmerctl

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/yaml"
)

// options are what every verb shares: the user's kubeconfig flags, the
// streams, the output format and what the output is.
type options struct {
	config *genericclioptions.ConfigFlags
	io     genericiooptions.IOStreams
	output string
	getenv func(string) string
}

// NewCommand is kubectl warmer with its verbs, writing to streams;
// getenv reads NO_COLOR (os.Getenv outside tests).
func NewCommand(streams genericiooptions.IOStreams, getenv func(string) string, version string) *cobra.Command {
	o := &options{config: genericclioptions.NewConfigFlags(true), io: streams, getenv: getenv}
	root := &cobra.Command{
		Use:   "kubectl-warmer",
		Short: "See warmer's ImageWarms as a person would: live progress, and why one is not Ready",
		Long: "kubectl warmer reads ImageWarms and NodeWarms with your kubeconfig and writes nothing.\n" +
			"It needs get, list and watch on imagewarms and list and watch on nodewarms\n" +
			"(ClusterRole warmer-viewer).",
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl warmer"},
	}
	o.config.AddFlags(root.PersistentFlags())
	root.AddCommand(newStatusCommand(o), newWhyCommand(o), newNodeCommand(o))
	return root
}

// addOutputFlag adds -o to a verb.
func (o *options) addOutputFlag(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "Output format: json or yaml; text when empty.")
}

func (o *options) checkOutput() error {
	switch o.output {
	case "", "json", "yaml":
		return nil
	}
	return fmt.Errorf("unknown output format %q: use -o json or -o yaml, or leave -o out for text", o.output)
}

func (o *options) reader() (*Reader, string, error) {
	ns, _, err := o.config.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, "", fmt.Errorf("reading the kubeconfig: %w", err)
	}
	cfg, err := o.config.ToRESTConfig()
	if err != nil {
		return nil, "", fmt.Errorf("reading the kubeconfig: %w", err)
	}
	r, err := NewReader(cfg)
	return r, ns, err
}

// terminal is the output's height when it is a terminal that may be
// drawn on (NO_COLOR unset), else 0.
func (o *options) terminal() int {
	f, ok := o.io.Out.(*os.File)
	if !ok || o.getenv("NO_COLOR") != "" || !term.IsTerminal(int(f.Fd())) {
		return 0
	}
	_, h, err := term.GetSize(int(f.Fd()))
	if err != nil || h <= 0 {
		return DefaultLines
	}
	return h
}

// screen is the height and bars for text: the terminal's, or a plain
// screen of DefaultLines.
func (o *options) screen() Screen {
	if h := o.terminal(); h > 0 {
		return Screen{Lines: h - 1, Bars: NewBars(true)}
	}
	return Screen{Lines: DefaultLines, Bars: NewBars(false)}
}

// print writes v as JSON or YAML, or calls text.
func (o *options) print(v any, text func(io.Writer) error) error {
	switch o.output {
	case "json":
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(o.io.Out, "%s\n", b)
		return err
	case "yaml":
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = o.io.Out.Write(b)
		return err
	}
	return text(o.io.Out)
}

func newWhyCommand(o *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "why NAME",
		Short: "Say in plain words why an ImageWarm is not Ready, and what to do",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.checkOutput(); err != nil {
				return err
			}
			s, err := o.summary(cmd, args[0])
			if err != nil {
				return err
			}
			w := Explain(s)
			return o.print(w, func(out io.Writer) error { return RenderWhy(out, w) })
		},
	}
	o.addOutputFlag(cmd)
	return cmd
}

func newNodeCommand(o *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "node NODE",
		Short: "Show what a node holds for whom: images, pins, verification, starts served, pulls under way",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.checkOutput(); err != nil {
				return err
			}
			r, _, err := o.reader()
			if err != nil {
				return err
			}
			nw, err := r.NodeWarm(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			rep := ReportNode(nw)
			return o.print(rep, func(out io.Writer) error { return RenderNode(out, rep, o.screen().Bars) })
		},
	}
	o.addOutputFlag(cmd)
	return cmd
}

// summary reads one ImageWarm and the NodeWarms once.
func (o *options) summary(cmd *cobra.Command, name string) (Summary, error) {
	r, ns, err := o.reader()
	if err != nil {
		return Summary{}, err
	}
	iw, err := r.ImageWarm(cmd.Context(), ns, name)
	if err != nil {
		return Summary{}, err
	}
	nws, err := r.NodeWarms(cmd.Context())
	if err != nil {
		return Summary{}, err
	}
	return Summarise(iw, nws), nil
}
