package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// TestEveryRuleMessageShown checks api.md against the CRD files' raw
// text: each CEL rule's message, as YAML folds it, is in the page, so a
// user can find the refusal they got.
func TestEveryRuleMessageShown(t *testing.T) {
	var page bytes.Buffer
	if err := writeAPI(&page, "../.."); err != nil {
		t.Fatal(err)
	}
	text := strings.Join(strings.Fields(page.String()), " ")
	files, _ := filepath.Glob("../../" + crdDir + "/*.yaml")
	n := 0
	// A message opens "- message:" and runs, folded, until "rule:".
	msg := regexp.MustCompile(`(?s)- message: (.*?)\n\s+(?:rule|messageExpression|reason|fieldPath):`)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msg.FindAllStringSubmatch(string(data), -1) {
			n++
			want := strings.Join(strings.Fields(m[1]), " ")
			if strings.HasPrefix(want, "'") {
				want = strings.ReplaceAll(strings.Trim(want, "'"), "''", "'")
			}
			if !strings.Contains(text, want) {
				t.Errorf("%s: message %q is not in api.md", filepath.Base(f), want)
			}
		}
	}
	if n == 0 {
		t.Fatal("found no rule in the CRDs; the test's pattern is broken")
	}
}

// TestFieldLine checks the facts of one field's line and its rules.
func TestFieldLine(t *testing.T) {
	minV, maxV, maxItems, maxLen := -1000.0, 1000.0, int64(8), int64(63)
	s := &apiextensionsv1.JSONSchemaProps{
		Type: "array", MaxItems: &maxItems, Description: "names are\nfolded.",
		Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{Type: "string", MaxLength: &maxLen}},
		XValidations: apiextensionsv1.ValidationRules{{Rule: "size(self) > 0", Message: "names must not be empty"},
			{Rule: "true", MessageExpression: "'got ' + string(size(self))"}},
	}
	n := &apiextensionsv1.JSONSchemaProps{Type: "integer", Format: "int32", Minimum: &minV, Maximum: &maxV,
		Default: &apiextensionsv1.JSON{Raw: []byte("0")}}
	var b bytes.Buffer
	writeField(&b, "names", s, true)
	writeField(&b, "priority", n, false)
	for _, want := range []string{
		"- **`names`** ([]string; required; maxItems 8; each item: maxLength 63)\n\n  names are\n  folded.\n",
		"  - \"names must not be empty\"\n",
		"  - the message `'got ' + string(size(self))` computes\n",
		"- **`priority`** (integer (int32); optional; default `0`; minimum -1000; maximum 1000)",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("got\n%s\nwant it to hold %q", b.String(), want)
		}
	}
}
