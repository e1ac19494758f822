// Command kubectl-warmer is the kubectl plugin `kubectl warmer`: status,
// why and node views of warmer's ImageWarms and NodeWarms
// (internal/warmerctl). Installed on the PATH (or with krew), kubectl
// finds it as `kubectl warmer`.
package main

import (
	"fmt"
	"os"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/warmer-dev/warmer/internal/warmerctl"
)

// version is stamped by the release build (-X main.version).
var version = "dev"

func main() {
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	if err := warmerctl.NewCommand(streams, os.Getenv, version).Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
