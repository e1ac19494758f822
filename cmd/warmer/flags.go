package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/warmer-dev/warmer/internal/credbundle"
)

// commonFlags are the flags both roles take.
type commonFlags struct {
	kubeconfig  string
	metricsAddr string
	// metricsSecure serves /metrics over HTTPS to authenticated,
	// authorized scrapers only (metrics.go).
	metricsSecure bool
	probeAddr     string
	pprofAddr     string
	// secretNamespace holds the nodes' credential bundles.
	secretNamespace string
	zap             zap.Options
}

func (c *commonFlags) bind(fs *pflag.FlagSet, metricsDefault, probeDefault string, secureDefault bool) {
	fs.StringVar(&c.kubeconfig, "kubeconfig", "", "Path to a kubeconfig; in a Pod the service account is used.")
	fs.StringVar(&c.metricsAddr, "metrics-bind-address", metricsDefault, "Address the Prometheus /metrics endpoint listens on; \"0\" turns it off.")
	fs.BoolVar(&c.metricsSecure, "metrics-secure", secureDefault,
		"Serve /metrics over HTTPS (a self-signed certificate made at start) to scrapers whose bearer token the API server accepts and lets get the non-resource URL /metrics (TokenReview and SubjectAccessReview, which the process's identity must be allowed to create); false serves plain HTTP to anyone who can reach the port.")
	fs.StringVar(&c.probeAddr, "health-probe-bind-address", probeDefault, "Address /healthz and /readyz listen on; \"0\" turns them off.")
	fs.StringVar(&c.pprofAddr, "pprof-bind-address", "0", "Address Go's /debug/pprof profiles listen on, for performance work; \"0\" (the default) turns them off.")
	fs.StringVar(&c.secretNamespace, "pull-secret-namespace", cmp.Or(os.Getenv("POD_NAMESPACE"), credbundle.DefaultNamespace),
		"Namespace where the controller keeps each node's sealed credential bundle (the pull secrets of the ImageWarms that select the node), and the only one whose Secrets the agents read, each only its own node's bundle (default $POD_NAMESPACE, from the downward API in the shipped manifests, else warmer-system).")
	// controller-runtime binds its zap flags on a standard flag set only.
	zfs := flag.NewFlagSet("zap", flag.ContinueOnError)
	c.zap.BindFlags(zfs)
	fs.AddGoFlagSet(zfs)
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

// newFlagSet makes a flag set of --flags, as every Kubernetes component
// takes them, that returns errors instead of printing and exiting: a bad
// flag is reported in one line, --help prints to help.
func newFlagSet(name, summary string, help io.Writer) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	// pflag calls Usage on every error too; only --help prints.
	fs.Usage = func() {}
	fs.SortFlags = false // in the order bind declares them: by topic
	helpers[fs] = func() { fmt.Fprintf(help, "%s\n\nFlags:\n%s", summary, fs.FlagUsages()) }
	return fs
}

// helpers print each flag set's help.
var helpers = map[*pflag.FlagSet]func(){}

// parse parses args; a bad flag becomes a usageError.
func parse(fs *pflag.FlagSet, args []string) error {
	if err := fs.Parse(longFlags(fs, args)); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
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

// longFlags rewrites -name and -name=value, the spellings Go's flag package
// accepted before warmer took pflag, to --name: pflag would read them as
// shorthand letters. Only names fs defines are rewritten, so a typo is
// still reported, and nothing after a "--" is touched.
func longFlags(fs *pflag.FlagSet, args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = a
		if a == "--" {
			copy(out[i:], args[i:])
			break
		}
		name, _, _ := strings.Cut(strings.TrimPrefix(a, "-"), "=")
		if strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && len(name) > 1 && fs.Lookup(name) != nil {
			out[i] = "-" + a
		}
	}
	return out
}

func positive(name string, d time.Duration) error {
	if d <= 0 {
		return usagef("--%s must be positive, got %v", name, d)
	}
	return nil
}
