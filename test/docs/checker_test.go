package docs

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// The checkers' own tests: each can fail when the checker goes wrong in
// the way it guards against, with no API server needed.

func TestGithubSlug(t *testing.T) {
	for heading, want := range map[string]string{
		"Startup taint": "startup-taint",
		"On the real node, with the agent as a Pod": "on-the-real-node-with-the-agent-as-a-pod",
		"`spec.images` and `__init__`":              "specimages-and-__init__",
		"A & B":                                     "a--b",
		"Émile's café":                              "émiles-café",
		"_emphasis_ and snake_case":                 "emphasis-and-snake_case",
		"**Strong** [link](x.md#y) text":            "strong-link-text",
		"Step 1: install (v0.1)":                    "step-1-install-v01",
		"<a id=\"x\"></a>Tagged":                    "tagged",
	} {
		if got := githubSlug(heading); got != want {
			t.Errorf("githubSlug(%q) = %q, want %q", heading, got, want)
		}
	}
}

func TestAnchors(t *testing.T) {
	text := strings.Join([]string{
		"# Same", "## Same", "### Same ###", "",
		"```sh", "# not a heading", "```", "",
		"Setext one", "==========", "",
		"- a list item", "---", "",
		`<a id="custom"></a>`,
		"#nospace is not a heading",
	}, "\n")
	got := anchors(text)
	want := map[string]bool{"same": true, "same-1": true, "same-2": true, "setext-one": true, "custom": true}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("anchors = %v, want %v", got, want)
	}
}

func TestLinkTargets(t *testing.T) {
	text := strings.Join([]string{
		`See [a](docs/a.md#x "title"), ![img](img.png) and [b](<docs/with space.md>).`,
		"[p](f(1).md) and `[code](not.md)` and [ext](https://example.com)",
		"```md", "[fenced](not-either.md)", "```",
		"[ref]: docs/ref.md",
		`<a href="docs/html.md">h</a>`,
	}, "\n")
	var got []string
	for _, l := range links(text) {
		got = append(got, l.target)
	}
	want := []string{"docs/a.md#x", "img.png", "docs/with space.md", "f(1).md", "https://example.com", "docs/ref.md", "docs/html.md"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("links = %q, want %q", got, want)
	}
}

func TestCheckLink(t *testing.T) {
	root := t.TempDir()
	for name, text := range map[string]string{
		"README.md":       "# Top\n## Install\n",
		"docs/a.md":       "# A page\n## Some part\n",
		"docs/code.go":    "package x\n",
		"docs/sub/keep":   "",
		"docs/b space.md": "# B\n",
	} {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	texts := map[string]string{"README.md": "# Top\n## Install\n", "docs/a.md": "# A page\n## Some part\n", "docs/b space.md": "# B\n"}
	for _, c := range []struct {
		file, target string
		ok           bool
	}{
		{"README.md", "docs/a.md", true},
		{"README.md", "docs/a.md#some-part", true},
		{"README.md", "#install", true},
		{"README.md", "/docs/a.md#a-page", true},
		{"docs/a.md", "../README.md#top", true},
		{"docs/a.md", "b%20space.md#b", true},
		{"docs/a.md", "sub", true},
		{"docs/a.md", "code.go#L1-L2", true},
		{"README.md", "docs/missing.md", false},
		{"README.md", "docs/a.md#no-such-part", false},
		{"README.md", "#Install", false},
		{"docs/a.md", "code.go#func", false},
		{"docs/a.md", "sub#x", false},
		{"docs/a.md", "../../outside.md", false},
	} {
		err := checkLink(root, c.file, c.target, texts)
		if (err == nil) != c.ok {
			t.Errorf("%s -> %s: error %v, want ok=%v", c.file, c.target, err, c.ok)
		}
	}
}

func TestYAMLBlocks(t *testing.T) {
	text := strings.Join([]string{
		"Text", // 1
		"1. A step:",
		"   ```yaml", // 3
		"   # needs: namespace label warmer.dev/cluster-levers=allowed",
		"   apiVersion: v1",
		"   kind: Namespace",
		"   ---",
		"   # only a comment",
		"   ---",
		"   a: 1", // 10
		"   ```",
		"```sh",
		"kubectl label namespace team-a warmer.dev/cluster-levers=allowed other=x",
		"```",
		"```yml", // 15
		"a: 1",
		"a: 2",
		"```",
		"```yaml",
		"# needs: a label", // 20
		"x: y",
		"```",
		"```console",
		"$ cat <<'EOF' | kubectl apply -f -", // 24
		"kind: ConfigMap",
		"EOF",
		"```",
	}, "\n")
	blocks := yamlBlocks("f.md", text)
	if len(blocks) != 4 {
		t.Fatalf("%d blocks, want 4: %+v", len(blocks), blocks)
	}
	if here := blocks[3]; here.where != "f.md:24" || len(here.docs) != 1 || here.docs[0].obj["kind"] != "ConfigMap" {
		t.Errorf("here-document block = %+v", here)
	}
	first := blocks[0]
	if first.where != "f.md:3" || len(first.docs) != 2 || first.docs[0].where != "f.md:4" || first.docs[1].where != "f.md:10" {
		t.Errorf("first block = %+v", first)
	}
	if d := first.docs[0]; d.err != nil || d.obj["kind"] != "Namespace" || d.needs["warmer.dev/cluster-levers"] != "allowed" {
		t.Errorf("first document = %+v", d)
	}
	if blocks[1].docs[0].err == nil {
		t.Error("a duplicate key is not an error")
	}
	if blocks[2].docs[0].err == nil {
		t.Error("a marker that cannot be read is not an error")
	}
	labels := namespaceLabels(text, blocks)
	if want := map[string]string{"warmer.dev/cluster-levers": "allowed", "other": "x"}; !reflect.DeepEqual(labels["team-a"], want) {
		t.Errorf("labels of team-a = %v, want %v", labels["team-a"], want)
	}
}
