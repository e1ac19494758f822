package docs

import (
	"fmt"
	"regexp"
	"strings"

	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"
)

// document is one YAML document of a sample: a fenced block may hold
// several, separated by "---".
type document struct {
	// where is "file:line" of the document's first line.
	where string
	lines []line
	// obj is the decoded document; nil when it is not a mapping.
	obj map[string]any
	// needs are the namespace labels its marker comments ask for.
	needs map[string]string
	// refused, when set, is part of the message the API server is shown
	// to refuse the document with.
	refused string
	// err is why the document could not be read.
	err error
}

// block is a sample as a reader meets it: a fenced YAML block of a
// Markdown file, or a file of config/samples.
type block struct {
	where string
	docs  []document
}

// Marker comments a sample may carry, on a line of their own:
//
//	# needs: namespace label warmer.dev/cluster-levers=allowed
//	# refused: only namespaces labelled warmer.dev/cluster-levers=allowed
//
// The first applies the sample in a namespace with those labels (a sample
// that shows an operator's lever); the second says the sample shows what
// the API server refuses, with part of its message.
var (
	needsMarker   = regexp.MustCompile(`^\s*#\s*needs:\s*(.*)$`)
	needsLabels   = regexp.MustCompile(`^namespace labels?\s+(.+)$`)
	refusedMarker = regexp.MustCompile(`^\s*#\s*refused:\s*(.+?)\s*$`)
	separator     = regexp.MustCompile(`^---\s*(#.*)?$`)
)

// yamlBlocks are the fenced YAML blocks of a Markdown file, and the
// here-documents its shell blocks pipe into kubectl apply or create.
func yamlBlocks(file, text string) []block {
	_, fences := splitMarkdown(text)
	var blocks []block
	for _, f := range fences {
		switch f.lang {
		case "yaml", "yml":
			blocks = append(blocks, block{where: fmt.Sprintf("%s:%d", file, f.open), docs: splitDocuments(file, f.body)})
		case "sh", "shell", "bash", "console", "shell-session":
			blocks = append(blocks, hereDocuments(file, f.body)...)
		}
	}
	return blocks
}

// A command that applies a here-document, such as `kubectl apply -f -
// <<EOF` or `cat <<EOF | kubectl create -f -`; hereDoc captures the
// delimiter.
var (
	kubectlApply = regexp.MustCompile(`\bkubectl\s+(?:\S+\s+)*(?:apply|create)\b`)
	hereDoc      = regexp.MustCompile(`<<-?\s*['"]?(\w+)['"]?`)
)

// hereDocuments are the YAML here-documents of a shell block's kubectl
// commands, each a block named by its command's line.
func hereDocuments(file string, body []line) []block {
	var blocks []block
	for i := 0; i < len(body); i++ {
		m := hereDoc.FindStringSubmatch(body[i].text)
		if m == nil || !kubectlApply.MatchString(body[i].text) {
			continue
		}
		start := i
		var lines []line
		for i++; i < len(body) && strings.TrimSpace(body[i].text) != m[1]; i++ {
			lines = append(lines, body[i])
		}
		blocks = append(blocks, block{where: fmt.Sprintf("%s:%d", file, body[start].n), docs: splitDocuments(file, lines)})
	}
	return blocks
}

// fileBlock is a YAML file as one block.
func fileBlock(file, text string) block {
	var lines []line
	for i, l := range strings.Split(text, "\n") {
		lines = append(lines, line{i + 1, strings.TrimSuffix(l, "\r")})
	}
	return block{where: file + ":1", docs: splitDocuments(file, lines)}
}

// splitDocuments splits a block's lines into YAML documents, leaving out
// those with nothing but comments and blank lines.
func splitDocuments(file string, lines []line) []document {
	var docs []document
	var cur []line
	flush := func() {
		if hasContent(cur) {
			d := document{where: fmt.Sprintf("%s:%d", file, cur[0].n), lines: cur}
			d.err = d.decode()
			docs = append(docs, d)
		}
		cur = nil
	}
	for _, l := range lines {
		if separator.MatchString(l.text) {
			flush()
			continue
		}
		cur = append(cur, l)
	}
	flush()
	return docs
}

// hasContent reports whether lines hold anything but comments and blanks.
func hasContent(lines []line) bool {
	for _, l := range lines {
		if s := strings.TrimSpace(l.text); s != "" && !strings.HasPrefix(s, "#") {
			return true
		}
	}
	return false
}

// decode parses the document and its markers. A document that is not
// YAML, or a marker that cannot be read, is an error: the reader would
// copy a sample that does not parse, or the test would skip what the
// marker meant to ask for.
func (d *document) decode() error {
	var text strings.Builder
	for _, l := range d.lines {
		text.WriteString(l.text + "\n")
		if err := d.readMarker(l.text); err != nil {
			return fmt.Errorf("line %d: %w", l.n, err)
		}
	}
	j, err := yaml.YAMLToJSONStrict([]byte(text.String()))
	if err != nil {
		return fmt.Errorf("not valid YAML: %w", err)
	}
	var v any
	if err := utiljson.Unmarshal(j, &v); err != nil {
		return fmt.Errorf("not valid YAML: %w", err)
	}
	d.obj, _ = v.(map[string]any)
	return nil
}

// readMarker records a marker comment of the document.
func (d *document) readMarker(s string) error {
	if m := refusedMarker.FindStringSubmatch(s); m != nil {
		d.refused = m[1]
		return nil
	}
	m := needsMarker.FindStringSubmatch(s)
	if m == nil {
		return nil
	}
	labels := needsLabels.FindStringSubmatch(strings.TrimSpace(m[1]))
	if labels == nil {
		return fmt.Errorf("marker %q: want `# needs: namespace label KEY=VALUE`", strings.TrimSpace(s))
	}
	if d.needs == nil {
		d.needs = map[string]string{}
	}
	for _, kv := range strings.FieldsFunc(labels[1], func(r rune) bool { return r == ',' || r == ' ' }) {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return fmt.Errorf("marker %q: label %q is not KEY=VALUE", strings.TrimSpace(s), kv)
		}
		d.needs[k] = v
	}
	return nil
}

// kubectlLabel is a command in the docs that labels a namespace.
var kubectlLabel = regexp.MustCompile(`kubectl\s+label\s+(?:namespaces?|ns)\s+([a-z0-9][a-z0-9.-]*)((?:\s+[A-Za-z0-9./_-]+=[A-Za-z0-9._-]*)+)`)

// namespaceLabels are the labels a file gives namespaces, by name: those
// of the Namespaces its samples show and of the `kubectl label namespace`
// commands it tells the reader to run. A sample in that file is applied
// in its namespace with these labels; a sample elsewhere is not, since
// its reader may not have read this file.
func namespaceLabels(text string, blocks []block) map[string]map[string]string {
	out := map[string]map[string]string{}
	add := func(ns, k, v string) {
		if out[ns] == nil {
			out[ns] = map[string]string{}
		}
		out[ns][k] = v
	}
	for _, m := range kubectlLabel.FindAllStringSubmatch(text, -1) {
		for _, kv := range strings.Fields(m[2]) {
			k, v, _ := strings.Cut(kv, "=")
			add(m[1], k, v)
		}
	}
	for _, b := range blocks {
		for _, d := range b.docs {
			if d.obj == nil || d.obj["apiVersion"] != "v1" || d.obj["kind"] != "Namespace" {
				continue
			}
			meta, _ := d.obj["metadata"].(map[string]any)
			name, _ := meta["name"].(string)
			labels, _ := meta["labels"].(map[string]any)
			for k, v := range labels {
				add(name, k, fmt.Sprint(v))
			}
		}
	}
	return out
}
