// Command warmer is warmer's one binary. `warmer agent` runs on every node
// (a DaemonSet) and keeps the images that ImageWarms ask for present there;
// `warmer controller` (a Deployment, leader-elected) sums up the nodes'
// reports in each ImageWarm's status.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/pflag"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
)

// version is stamped at build time: -ldflags "-X main.version=v0.1.0".
var version = "dev"

const usage = `warmer keeps container images present on Kubernetes nodes.

Usage:
  warmer agent --node-name=NODE [flags]   run the node agent (DaemonSet)
  warmer controller [flags]               run the status controller (Deployment)
  warmer version                          print the version

Run "warmer agent --help" or "warmer controller --help" for their flags.
`

// binaryClock is the one clock of a warmer process: the agent, its pull
// engine and the ImageWarm controller all tell time by it, so a test (or a
// future fake) that swaps it moves every part's time together.
var binaryClock clock.WithDelayedExecution = clock.RealClock{}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run dispatches to a role and returns the exit code: 0, 1 for a failure
// at run time, 2 for bad usage.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "agent":
		err = runAgent(args[1:], stdout)
	case "controller":
		err = runController(args[1:], stdout)
	case "version", "--version":
		fmt.Fprintln(stdout, "warmer", version)
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "warmer: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	var ue usageError
	switch {
	case err == nil, errors.Is(err, pflag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "warmer %s: %v\n", args[0], err)
		return 2
	default:
		ctrl.Log.Error(err, "Exiting")
		fmt.Fprintf(stderr, "warmer %s: %v\n", args[0], err)
		return 1
	}
}

// usageError is a bad flag or argument.
type usageError struct{ error }

// Unwrap exposes the cause, for errors.Is.
func (u usageError) Unwrap() error { return u.error }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }
