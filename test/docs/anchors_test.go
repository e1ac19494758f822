package docs

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"
)

var (
	atxHeading    = regexp.MustCompile(`^ {0,3}#{1,6}(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$`)
	setextLine    = regexp.MustCompile(`^ {0,3}(=+|-+)[ \t]*$`)
	htmlAnchor    = regexp.MustCompile(`<[a-zA-Z][^>]*\s(?:id|name)\s*=\s*["']([^"']+)["']`)
	codeSpan      = regexp.MustCompile("(`+)(.*?)(`+)")
	inlineLink    = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	refLink       = regexp.MustCompile(`\[([^\]]*)\]\[[^\]]*\]`)
	htmlTag       = regexp.MustCompile(`</?[a-zA-Z][^>]*>`)
	underscoreEmp = regexp.MustCompile(`(^|[^\p{L}\p{N}_])_{1,2}([^_]+?)_{1,2}([^\p{L}\p{N}_]|$)`)
)

// anchors are the fragment identifiers a Markdown file offers: GitHub's
// slug of each heading, numbered from the second of a kind, and the ids
// and names of HTML elements.
func anchors(text string) map[string]bool {
	prose, _ := splitMarkdown(text)
	out := map[string]bool{}
	seen := map[string]int{}
	for _, h := range headings(prose) {
		slug := githubSlug(h)
		if n := seen[slug]; n > 0 {
			out[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	for _, l := range prose {
		for _, m := range htmlAnchor.FindAllStringSubmatch(l.text, -1) {
			out[m[1]] = true
		}
	}
	return out
}

// headings are the texts of the ATX (# Title) and setext (Title over
// === or ---) headings among prose lines, in order.
func headings(prose []line) []string {
	var out []string
	for i, l := range prose {
		if m := atxHeading.FindStringSubmatch(l.text); m != nil {
			out = append(out, m[1])
			continue
		}
		// A setext heading underlines a paragraph line: the line before
		// is text and directly above (not a fence's end or a blank).
		if i == 0 || !setextLine.MatchString(l.text) {
			continue
		}
		prev := prose[i-1]
		text := strings.TrimSpace(prev.text)
		if prev.n != l.n-1 || text == "" || atxHeading.MatchString(prev.text) || setextLine.MatchString(prev.text) || isListOrTable(text) {
			continue
		}
		out = append(out, text)
	}
	return out
}

// isListOrTable reports whether a line is a list item or a table row,
// which "---" below does not make a heading.
func isListOrTable(s string) bool {
	return strings.HasPrefix(s, "|") || strings.HasPrefix(s, "- ") || strings.HasPrefix(s, "* ") || strings.HasPrefix(s, "+ ")
}

// githubSlug is the anchor GitHub gives a heading: the heading's text as
// rendered (code spans, links and emphasis reduced to their text), in
// lower case, with every character that is not a letter, digit, mark,
// space, '-' or '_' removed and each space turned into '-'.
func githubSlug(heading string) string {
	s := inlineLink.ReplaceAllString(heading, "$1")
	s = refLink.ReplaceAllString(s, "$1")
	s = htmlTag.ReplaceAllString(s, "")
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(renderText(s))) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// renderText reduces code spans to their content and removes the
// underscores of emphasis outside them; other markup is punctuation,
// which the slug drops anyway.
func renderText(s string) string {
	var b strings.Builder
	last := 0
	for _, m := range codeSpan.FindAllStringSubmatchIndex(s, -1) {
		b.WriteString(unemphasize(s[last:m[0]]))
		b.WriteString(s[m[4]:m[5]])
		last = m[1]
	}
	b.WriteString(unemphasize(s[last:]))
	return b.String()
}

// unemphasize removes the underscores of _emphasis_ and __strong__.
func unemphasize(s string) string {
	for prev := ""; prev != s; {
		prev = s
		s = underscoreEmp.ReplaceAllString(s, "$1$2$3")
	}
	return s
}
