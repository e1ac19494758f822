package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// role is one role's flag set, as `warmer refdocs-flags` prints it (a
// build of cmd/warmer with the refdocs tag; cmd/warmer/refdocs.go).
type role struct {
	Name    string `json:"name"`
	Summary string `json:"summary"`
	Flags   []struct {
		Name, Type, Default, Usage string
	} `json:"flags"`
}

// writeFlags writes flags.md: every flag of each role, in the order
// --help lists them.
func writeFlags(w *bytes.Buffer, root string) error {
	roles, err := flagSets(root)
	if err != nil {
		return err
	}
	header(w, "Flags", "For operators who tune the agent or the controller: every flag of `warmer agent` and `warmer controller`, with its default.",
		"the binary's own flag sets (cmd/warmer)")
	for _, r := range roles {
		fmt.Fprintf(w, "\n## warmer %s\n\n%s\n\n| Flag | Type | Default | Meaning |\n|---|---|---|---|\n", r.Name, r.Summary)
		for _, f := range r.Flags {
			def := ""
			if f.Default != "" {
				def = code(f.Default)
			}
			fmt.Fprintf(w, "| `--%s` | %s | %s | %s |\n", f.Name, f.Type, cell(def), cell(f.Usage))
		}
	}
	return nil
}

// flagSets builds cmd/warmer with the refdocs tag and asks it for its flag
// sets, with an empty environment: a default taken from a variable such
// as $NODE_NAME is then the one a Pod without it gets, not the shell's.
func flagSets(root string) ([]role, error) {
	dir, err := os.MkdirTemp("", "refdocs")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "warmer")
	build := exec.Command("go", "build", "-tags", "refdocs", "-o", bin, "./cmd/warmer")
	build.Dir, build.Stderr = root, os.Stderr
	if err := build.Run(); err != nil {
		return nil, fmt.Errorf("building cmd/warmer: %w", err)
	}
	dump := exec.Command(bin, "refdocs-flags")
	dump.Env, dump.Stderr = []string{}, os.Stderr
	out, err := dump.Output()
	if err != nil {
		return nil, fmt.Errorf("listing the flags: %w", err)
	}
	var roles []role
	if err := json.Unmarshal(out, &roles); err != nil {
		return nil, fmt.Errorf("reading the flags: %w", err)
	}
	if len(roles) == 0 {
		return nil, fmt.Errorf("cmd/warmer listed no flag set")
	}
	return roles, nil
}
