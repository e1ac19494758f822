// Command refdocs writes warmer's reference pages, docs/reference/*.md,
// each from the one place its facts live in the code: api.md from the CRDs
// controller-gen makes of the Go types (config/crd/bases), flags.md from
// the binary's flag sets, metrics.md from the metrics' definitions (checked
// against the registries they land in), reasons.md from the constants of
// api/v1alpha1/conditions.go and the agent's event constructors,
// kubectl-warmer.md from the plugin's commands (internal/warmerctl). `make
// docs` runs it; `make verify` runs it and fails when a page changed.
//
// It is our own small tool rather than a generic CRD documenter (such as
// elastic/crd-ref-docs): one page of three kinds needs no templates or
// configuration, and the CEL rules' messages, which users meet as refusals,
// come straight from the schema the API server enforces.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
)

// page is one reference page: its file name and what writes it.
type page struct {
	name  string
	write func(w *bytes.Buffer, root string) error
}

var pages = []page{
	{"api.md", writeAPI},
	{"flags.md", writeFlags},
	{"metrics.md", writeMetrics},
	{"reasons.md", writeReasons},
	{"kubectl-warmer.md", writePlugin},
}

func main() {
	root := flag.String("root", ".", "the repository's root")
	out := flag.String("out", "docs/reference", "folder the pages are written to, under -root")
	flag.Parse()
	if err := run(*root, filepath.Join(*root, *out)); err != nil {
		fmt.Fprintln(os.Stderr, "refdocs:", err)
		os.Exit(1)
	}
}

func run(root, out string) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	for _, p := range pages {
		var b bytes.Buffer
		if err := p.write(&b, root); err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
		if err := os.WriteFile(filepath.Join(out, p.name), tidy(b.Bytes()), 0o644); err != nil {
			return err
		}
	}
	return nil
}

var blankLines = regexp.MustCompile(`\n{3,}`)

// tidy lets the writers end each block with a blank line without counting:
// runs of blank lines become one, and the page ends in one newline.
func tidy(page []byte) []byte {
	page = blankLines.ReplaceAll(page, []byte("\n\n"))
	return append(bytes.TrimRight(page, "\n"), '\n')
}
