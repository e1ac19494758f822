// Package docs holds the tests that keep the documentation true: every
// YAML sample of a warmer object in the Markdown and in config/samples is
// created on a real kube-apiserver with the shipped CRDs and admission
// policies, and every relative link and anchor resolves.
//
// The tests walk a documentation tree, by default this module's checkout;
// WARMER_DOCS_ROOT points them at another (a worktree where the docs are
// being rewritten), checked against this module's CRDs and policies.
package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/warmer-dev/warmer/test/testbed"
)

// rootEnv names the documentation tree to check instead of the module's.
const rootEnv = "WARMER_DOCS_ROOT"

// skippedDirs are never walked: version control, tools' caches, and test
// fixtures that are inputs to other tests rather than documentation.
var skippedDirs = []string{".git", "node_modules", "testdata", "vendor"}

// docsRoot is the tree to check, as an absolute path.
func docsRoot(t *testing.T) string {
	t.Helper()
	root := os.Getenv(rootEnv)
	if root == "" {
		return testbed.RepoRoot(t)
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		t.Fatalf("%s=%s: %v", rootEnv, root, err)
	}
	if _, err := os.Stat(filepath.Join(abs, "README.md")); err != nil {
		t.Fatalf("%s=%s is not a documentation tree: %v", rootEnv, root, err)
	}
	return abs
}

// markdownFiles are the Markdown files under root, relative to it and in
// a stable order: the README, CHANGELOG and other top-level pages,
// docs/ and anything else a reader may browse (a chart's README).
func markdownFiles(t *testing.T, root string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (strings.HasPrefix(name, ".") || slices.Contains(skippedDirs, name)) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.EqualFold(filepath.Ext(path), ".md") {
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walking %s: %v", root, err)
	}
	if !slices.Contains(files, "README.md") {
		t.Fatalf("no README.md in %s", root)
	}
	return files
}

// sampleFiles are the YAML files of config/samples, relative to root.
func sampleFiles(t *testing.T, root string) []string {
	t.Helper()
	var files []string
	for _, pattern := range []string{"*.yaml", "*.yml"} {
		m, err := filepath.Glob(filepath.Join(root, "config", "samples", pattern))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range m {
			rel, _ := filepath.Rel(root, f)
			files = append(files, filepath.ToSlash(rel))
		}
	}
	slices.Sort(files)
	return files
}

// readFile reads rel under root.
func readFile(t *testing.T, root, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
