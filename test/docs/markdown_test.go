package docs

import (
	"strings"
)

// line is one line of a Markdown file with its 1-based number.
type line struct {
	n    int
	text string
}

// fence is a fenced code block: its language (the info string's first
// word, lower case), the number of the line that opens it, and its
// content with the fence's indentation removed.
type fence struct {
	lang string
	open int
	body []line
}

// splitMarkdown separates a Markdown file into the lines of prose and
// its fenced code blocks, so that neither a heading nor a link is read
// out of code and no sample out of prose. A fence left open runs to the
// end of the file, as CommonMark has it.
func splitMarkdown(text string) (prose []line, fences []fence) {
	var cur *fence
	var marker string
	var indent int
	for i, l := range strings.Split(text, "\n") {
		l = strings.TrimSuffix(l, "\r")
		n := i + 1
		trimmed := strings.TrimLeft(l, " \t")
		if cur != nil {
			if strings.HasPrefix(trimmed, marker) && strings.Trim(trimmed, marker[:1]+" \t") == "" {
				fences = append(fences, *cur)
				cur = nil
				continue
			}
			cur.body = append(cur.body, line{n, dedent(l, indent)})
			continue
		}
		if m, info, ok := openingFence(trimmed); ok {
			marker, indent = m, len(l)-len(trimmed)
			lang, _, _ := strings.Cut(strings.TrimSpace(info), " ")
			cur = &fence{lang: strings.ToLower(lang), open: n}
			continue
		}
		prose = append(prose, line{n, l})
	}
	if cur != nil {
		fences = append(fences, *cur)
	}
	return prose, fences
}

// openingFence reports whether s (without its indentation) opens a fence,
// with the fence's marker (three or more backticks or tildes) and info
// string.
func openingFence(s string) (marker, info string, ok bool) {
	for _, c := range []string{"`", "~"} {
		run := len(s) - len(strings.TrimLeft(s, c))
		if run < 3 {
			continue
		}
		info = s[run:]
		if c == "`" && strings.Contains(info, "`") {
			return "", "", false // an inline code span, not a fence
		}
		return s[:run], info, true
	}
	return "", "", false
}

// dedent removes up to n leading spaces, the indentation of a fence
// inside a list item.
func dedent(s string, n int) string {
	for i := 0; i < n && strings.HasPrefix(s, " "); i++ {
		s = s[1:]
	}
	return s
}
