package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// commonFlags are the flags both roles take.
type commonFlags struct {
	kubeconfig  string
	metricsAddr string
	probeAddr   string
	pprofAddr   string
	zap         zap.Options
}

func (c *commonFlags) bind(fs *flag.FlagSet, metricsDefault, probeDefault string) {
	fs.StringVar(&c.kubeconfig, "kubeconfig", "", "Path to a kubeconfig; in a Pod the service account is used.")
	fs.StringVar(&c.metricsAddr, "metrics-bind-address", metricsDefault, "Address the Prometheus /metrics endpoint listens on; \"0\" turns it off.")
	fs.StringVar(&c.probeAddr, "health-probe-bind-address", probeDefault, "Address /healthz and /readyz listen on; \"0\" turns them off.")
	fs.StringVar(&c.pprofAddr, "pprof-bind-address", "0", "Address Go's /debug/pprof profiles listen on, for performance work; \"0\" (the default) turns them off.")
	c.zap.BindFlags(fs)
}

// restConfig builds the client configuration and sets up logging.
func (c *commonFlags) restConfig() (*rest.Config, error) {
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&c.zap)))
	if c.kubeconfig == "" {
		return ctrl.GetConfig()
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err == nil && cfg.QPS == 0 {
		// As ctrl.GetConfig does in a Pod: no client-side limit (the API
		// server's priority and fairness applies), rather than client-go's
		// default of 5 requests a second.
		cfg.QPS = -1
	}
	return cfg, err
}

// newFlagSet makes a flag set that returns errors instead of printing and
// exiting: a bad flag is reported in one line, --help prints to help.
func newFlagSet(name, summary string, help io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	// The flag package calls Usage on every error too; only --help prints.
	fs.Usage = func() {}
	helpers[fs] = func() {
		fs.SetOutput(help)
		fmt.Fprintf(help, "%s\n\nFlags:\n", summary)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
	return fs
}

// helpers print each flag set's help.
var helpers = map[*flag.FlagSet]func(){}

// parse parses args; a bad flag becomes a usageError.
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			helpers[fs]()
			return err
		}
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	return nil
}

func positive(name string, d time.Duration) error {
	if d <= 0 {
		return usagef("--%s must be positive, got %v", name, d)
	}
	return nil
}
