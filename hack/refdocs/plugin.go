package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/warmer-dev/warmer/internal/warmerctl"
)

// writePlugin writes kubectl-warmer.md: each verb of kubectl warmer with
// its own flags, then the flags every verb takes, from the commands
// themselves (internal/warmerctl).
func writePlugin(w *bytes.Buffer, _ string) error {
	root := warmerctl.NewCommand(genericiooptions.NewTestIOStreamsDiscard(), func(string) string { return "" }, "")
	header(w, "kubectl warmer", "For people who follow warms from kubectl: every verb and flag of the `kubectl warmer` plugin ([getting started](../getting-started.md#the-kubectl-plugin)).",
		"the plugin's commands (internal/warmerctl)")
	fmt.Fprintf(w, "\n%s\n", root.Long)
	for _, c := range root.Commands() {
		if c.Hidden || c.Name() == "help" || c.Name() == "completion" {
			continue
		}
		fmt.Fprintf(w, "\n## %s\n\n`kubectl warmer %s`\n\n%s.\n\n", c.Name(), c.Use, strings.TrimSuffix(c.Short, "."))
		if c.Long != "" {
			fmt.Fprintf(w, "%s\n\n", oneLineText(c.Long))
		}
		flagTable(w, c.LocalNonPersistentFlags())
	}
	w.WriteString("\n## Flags of every verb\n\nThe kubeconfig flags kubectl takes (client-go's cli-runtime).\n\n")
	flagTable(w, root.PersistentFlags())
	return nil
}

func oneLineText(s string) string { return strings.Join(strings.Fields(s), " ") }

// flagTable writes one row per flag, the home folder written as ~.
func flagTable(w *bytes.Buffer, fs *pflag.FlagSet) {
	home, _ := os.UserHomeDir()
	w.WriteString("| Flag | Type | Default | Meaning |\n|---|---|---|---|\n")
	fs.VisitAll(func(f *pflag.Flag) {
		name := "`--" + f.Name + "`"
		if f.Shorthand != "" {
			name = "`-" + f.Shorthand + "`, " + name
		}
		def := f.DefValue
		if home != "" {
			def = strings.Replace(def, home, "~", 1)
		}
		if def != "" && def != "[]" {
			def = code(def)
		} else {
			def = ""
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", name, f.Value.Type(), cell(def), cell(f.Usage))
	})
	w.WriteString("\n")
}
