//go:build refdocs

package main

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"

	"github.com/spf13/pflag"
)

// Built only with the refdocs tag, by hack/refdocs: `warmer refdocs-flags`
// prints each role's flag set as JSON and exits, so docs/reference/flags.md
// comes from the flag sets themselves (package main cannot be imported).
// hack/refdocs runs it with an empty environment: defaults read from
// $NODE_NAME and the like are then the ones a Pod without them gets.
func init() {
	if len(os.Args) != 2 || os.Args[1] != "refdocs-flags" {
		return
	}
	var a agentFlags
	var c controllerFlags
	var help bytes.Buffer
	out := []refdocsRole{
		describeFlags(agentFlagSet(&a, &help), &help),
		describeFlags(controllerFlagSet(&c, &help), &help),
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		os.Exit(1)
	}
	os.Exit(0)
}

// refdocsRole and refdocsFlag are the JSON hack/refdocs reads.
type refdocsRole struct {
	Name    string        `json:"name"`
	Summary string        `json:"summary"`
	Flags   []refdocsFlag `json:"flags"`
}

type refdocsFlag struct {
	Name    string `json:"name"`
	Type    string `json:"type"`
	Default string `json:"default"`
	Usage   string `json:"usage"`
}

// describeFlags lists fs in its declared order, with the summary line of
// its --help.
func describeFlags(fs *pflag.FlagSet, help *bytes.Buffer) refdocsRole {
	help.Reset()
	helpers[fs]()
	summary, _, _ := strings.Cut(help.String(), "\n\nFlags:")
	r := refdocsRole{Name: fs.Name(), Summary: summary}
	fs.VisitAll(func(f *pflag.Flag) {
		r.Flags = append(r.Flags, refdocsFlag{Name: f.Name, Type: f.Value.Type(), Default: f.DefValue, Usage: f.Usage})
	})
	return r
}
