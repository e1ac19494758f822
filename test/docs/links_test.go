package docs

import (
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var (
	refDefinition = regexp.MustCompile(`^ {0,3}\[[^\]]+\]:\s*<?([^\s>]+)>?`)
	htmlLink      = regexp.MustCompile(`(?:href|src)\s*=\s*["']([^"']+)["']`)
	urlScheme     = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
	lineAnchor    = regexp.MustCompile(`^L\d+(-L\d+)?$`)
)

// link is a link target and the line it is on.
type link struct {
	n      int
	target string
}

// TestLinks checks that every relative link of every Markdown file names
// a file of the tree, and every #anchor a heading (or HTML id) of the
// Markdown file it points into. External links are listed, not fetched.
func TestLinks(t *testing.T) {
	root := docsRoot(t)
	files := markdownFiles(t, root)
	texts := map[string]string{}
	for _, f := range files {
		texts[f] = readFile(t, root, f)
	}
	var external []string
	checked := 0
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			for _, l := range links(texts[f]) {
				if urlScheme.MatchString(l.target) {
					if strings.HasPrefix(l.target, "http") {
						external = append(external, l.target)
					}
					continue
				}
				checked++
				if err := checkLink(root, f, l.target, texts); err != nil {
					t.Errorf("%s:%d: link %s: %v", f, l.n, l.target, err)
				}
			}
		})
	}
	slices.Sort(external)
	external = slices.Compact(external)
	t.Logf("%d relative links checked; %d external links not fetched:\n%s", checked, len(external), strings.Join(external, "\n"))
	if checked == 0 {
		t.Errorf("no relative link found in %d Markdown files: the scan is broken", len(files))
	}
}

// links are the link targets of a Markdown file's prose: inline links and
// images, reference definitions and HTML href and src attributes. Code
// spans and fenced blocks are not prose.
func links(text string) []link {
	prose, _ := splitMarkdown(text)
	var out []link
	for _, l := range prose {
		s := codeSpan.ReplaceAllString(l.text, "")
		for _, target := range inlineTargets(s) {
			out = append(out, link{l.n, target})
		}
		if m := refDefinition.FindStringSubmatch(s); m != nil {
			out = append(out, link{l.n, m[1]})
		}
		for _, m := range htmlLink.FindAllStringSubmatch(s, -1) {
			out = append(out, link{l.n, m[1]})
		}
	}
	return out
}

// inlineTargets are the destinations of the inline links on a line: what
// follows each "](", up to the closing parenthesis, without a title.
func inlineTargets(s string) []string {
	var out []string
	for {
		i := strings.Index(s, "](")
		if i < 0 {
			return out
		}
		s = strings.TrimLeft(s[i+2:], " ")
		if rest, ok := strings.CutPrefix(s, "<"); ok {
			if end := strings.Index(rest, ">"); end >= 0 {
				out = append(out, rest[:end])
			}
			continue
		}
		depth, end := 0, len(s)
	scan:
		for j, r := range s {
			switch {
			case r == '(':
				depth++
			case r == ')' && depth == 0, r == ' ', r == '\t':
				end = j
				break scan
			case r == ')':
				depth--
			}
		}
		if end > 0 {
			out = append(out, s[:end])
		}
	}
}

// checkLink checks a relative target of file against the tree.
func checkLink(root, file, target string, texts map[string]string) error {
	p, frag, _ := strings.Cut(target, "#")
	p, err := url.PathUnescape(p)
	if err != nil {
		return err
	}
	switch {
	case p == "":
		p = file
	case strings.HasPrefix(p, "/"):
		p = path.Clean(strings.TrimPrefix(p, "/"))
	default:
		p = path.Join(path.Dir(file), p)
	}
	if p == ".." || strings.HasPrefix(p, "../") {
		return fmt.Errorf("points outside the tree")
	}
	info, err := os.Stat(root + "/" + p)
	if err != nil {
		return fmt.Errorf("no such file %s", p)
	}
	if frag == "" {
		return nil
	}
	if frag, err = url.PathUnescape(frag); err != nil {
		return err
	}
	return checkAnchor(p, frag, info.IsDir(), texts)
}

// checkAnchor checks that fragment frag exists in target.
func checkAnchor(target, frag string, dir bool, texts map[string]string) error {
	switch {
	case dir:
		return fmt.Errorf("an anchor on directory %s", target)
	case !strings.EqualFold(path.Ext(target), ".md"):
		if !lineAnchor.MatchString(frag) {
			return fmt.Errorf("anchor #%s on %s, which is not Markdown: only #L<line> works there", frag, target)
		}
		return nil
	}
	text, ok := texts[target]
	if !ok {
		return fmt.Errorf("%s is not among the Markdown files checked", target)
	}
	if !anchors(text)[frag] {
		return fmt.Errorf("no heading in %s has anchor #%s", target, frag)
	}
	return nil
}

// docReference is a mention of a doc page in a manifest's or the chart's
// comments: "docs/operations.md#resources".
var docReference = regexp.MustCompile(`docs/[\w./-]+\.md(?:#[\w-]+)?`)

// TestManifestDocReferences checks the doc pages and anchors that the
// comments of config/ and charts/ point their readers to: those files
// are not Markdown, and their references went stale unseen when the
// docs moved.
func TestManifestDocReferences(t *testing.T) {
	root := docsRoot(t)
	texts := map[string]string{}
	for _, f := range markdownFiles(t, root) {
		texts[f] = readFile(t, root, f)
	}
	checked := 0
	for _, dir := range []string{"config", "charts"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".yaml") {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			for i, line := range strings.Split(string(b), "\n") {
				for _, ref := range docReference.FindAllString(line, -1) {
					checked++
					// Resolved from the tree's root, as a reader takes them.
					if err := checkLink(root, "README.md", ref, texts); err != nil {
						t.Errorf("%s:%d: %s: %v", rel, i+1, ref, err)
					}
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if checked == 0 {
		t.Error("no doc reference found in config/ or charts/: the scan is broken")
	}
}
