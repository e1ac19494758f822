package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// crdDir holds the CRDs controller-gen writes from api/v1alpha1; their
// schemas carry the Go doc comments and every marker's bound, so they are
// the one source of api.md.
const crdDir = "config/crd/bases"

// writeAPI writes api.md: every kind's columns, fields and validation
// messages.
func writeAPI(w *bytes.Buffer, root string) error {
	files, err := filepath.Glob(filepath.Join(root, crdDir, "*.yaml"))
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("no CRDs in %s", crdDir)
	}
	slices.Sort(files)
	header(w, "API reference", "For anyone who writes warmer's objects or reads their status: every field of each kind, its type, bounds and default, and the message the API server answers when a value breaks a rule.",
		"the CRDs in "+crdDir+" (themselves generated from the Go types in api/v1alpha1)")
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(data, &crd); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		if err := writeCRD(w, &crd); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
	}
	return nil
}

func writeCRD(w *bytes.Buffer, crd *apiextensionsv1.CustomResourceDefinition) error {
	if len(crd.Spec.Versions) != 1 || crd.Spec.Versions[0].Schema == nil {
		return fmt.Errorf("want one version with a schema, got %d", len(crd.Spec.Versions))
	}
	v := crd.Spec.Versions[0]
	kind := crd.Spec.Names.Kind
	root := v.Schema.OpenAPIV3Schema
	fmt.Fprintf(w, "\n## %s\n\n`%s/%s`, %s", kind, crd.Spec.Group, v.Name, strings.ToLower(string(crd.Spec.Scope)))
	if len(crd.Spec.Names.ShortNames) > 0 {
		fmt.Fprintf(w, ", short name %s", code(strings.Join(crd.Spec.Names.ShortNames, ", ")))
	}
	fmt.Fprintf(w, ".\n\n%s\n", strings.TrimSpace(root.Description))
	writeRules(w, "", root)
	writeColumns(w, v.AdditionalPrinterColumns)
	for _, name := range []string{"spec", "status"} {
		if p, ok := root.Properties[name]; ok {
			writeObject(w, kind, name, &p)
		}
	}
	return nil
}

// writeColumns lists what `kubectl get` shows.
func writeColumns(w *bytes.Buffer, cols []apiextensionsv1.CustomResourceColumnDefinition) {
	if len(cols) == 0 {
		return
	}
	fmt.Fprintf(w, "\nColumns of `kubectl get` (those marked wide with `-o wide` only):\n\n| Column | Value | Description |\n|---|---|---|\n")
	for _, c := range cols {
		name := c.Name
		if c.Priority > 0 {
			name += " (wide)"
		}
		fmt.Fprintf(w, "| %s | %s | %s |\n", cell(name), cell(code(c.JSONPath)), cell(c.Description))
	}
}

// writeObject writes one object's fields as a list, then each nested
// object's own section.
func writeObject(w *bytes.Buffer, kind, path string, s *apiextensionsv1.JSONSchemaProps) {
	fmt.Fprintf(w, "\n### %s `%s`\n\n", kind, path)
	if path == "spec" || path == "status" {
		if d := strings.TrimSpace(s.Description); d != "" {
			fmt.Fprintf(w, "%s\n\n", d)
		}
		writeRules(w, "", s)
	}
	names := slices.Sorted(mapKeys(s.Properties))
	for _, name := range names {
		p := s.Properties[name]
		writeField(w, name, &p, slices.Contains(s.Required, name))
	}
	for _, name := range names {
		p := s.Properties[name]
		if obj, sub := objectOf(&p); obj != nil {
			writeObject(w, kind, path+"."+name+sub, obj)
		}
	}
}

// objectOf is the object schema a field holds, directly or as the items
// of a list or the values of a map, with the path suffix that reaches it.
func objectOf(s *apiextensionsv1.JSONSchemaProps) (*apiextensionsv1.JSONSchemaProps, string) {
	switch {
	case len(s.Properties) > 0:
		return s, ""
	case s.Items != nil && s.Items.Schema != nil && len(s.Items.Schema.Properties) > 0:
		return s.Items.Schema, "[]"
	case s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil && len(s.AdditionalProperties.Schema.Properties) > 0:
		return s.AdditionalProperties.Schema, "{}"
	}
	return nil, ""
}

// writeField writes one field's list item: name, type, required or not,
// default and bounds on the first line, its doc comment and rules below.
func writeField(w *bytes.Buffer, name string, s *apiextensionsv1.JSONSchemaProps, required bool) {
	facts := []string{typeOf(s)}
	if required {
		facts = append(facts, "required")
	} else {
		facts = append(facts, "optional")
	}
	if s.Default != nil {
		facts = append(facts, "default "+code(string(s.Default.Raw)))
	}
	facts = append(facts, bounds(s)...)
	if s.Items != nil && s.Items.Schema != nil {
		if b := bounds(s.Items.Schema); len(b) > 0 {
			facts = append(facts, "each item: "+strings.Join(b, ", "))
		}
	}
	fmt.Fprintf(w, "- **`%s`** (%s)", name, strings.Join(facts, "; "))
	if d := strings.TrimSpace(s.Description); d != "" {
		fmt.Fprintf(w, "\n\n  %s", indent(d, 2))
	}
	w.WriteString("\n")
	writeRules(w, "  ", s)
	if s.Items != nil && s.Items.Schema != nil {
		writeRules(w, "  ", s.Items.Schema)
	}
	w.WriteString("\n")
}

// writeRules lists a schema's CEL rules by the message a refusal carries.
func writeRules(w *bytes.Buffer, pad string, s *apiextensionsv1.JSONSchemaProps) {
	if len(s.XValidations) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%sRefused with:\n\n", pad)
	for _, r := range s.XValidations {
		msg := strconv.Quote(r.Message)
		switch {
		case r.MessageExpression != "":
			msg = "the message " + code(r.MessageExpression) + " computes"
		case r.Message == "":
			msg = "`failed rule: " + r.Rule + "`"
		}
		fmt.Fprintf(w, "%s- %s\n", pad, msg)
	}
	w.WriteString("\n")
}

// typeOf names a schema's type as a Go reader would: []string,
// map[string]string, int or string.
func typeOf(s *apiextensionsv1.JSONSchemaProps) string {
	switch {
	case s.XIntOrString:
		return "int or string"
	case s.Type == "array" && s.Items != nil && s.Items.Schema != nil:
		return "[]" + typeOf(s.Items.Schema)
	case s.Type == "object" && s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil:
		return "map[string]" + typeOf(s.AdditionalProperties.Schema)
	case s.Format != "":
		return s.Type + " (" + s.Format + ")"
	}
	return s.Type
}

// bounds are a schema's limits other than CEL rules.
func bounds(s *apiextensionsv1.JSONSchemaProps) []string {
	var out []string
	add := func(name string, v *int64) {
		if v != nil {
			out = append(out, fmt.Sprintf("%s %d", name, *v))
		}
	}
	add("minItems", s.MinItems)
	add("maxItems", s.MaxItems)
	add("minLength", s.MinLength)
	add("maxLength", s.MaxLength)
	add("minProperties", s.MinProperties)
	add("maxProperties", s.MaxProperties)
	if s.Minimum != nil {
		out = append(out, ifElse(s.ExclusiveMinimum, "above ", "minimum ")+number(*s.Minimum))
	}
	if s.Maximum != nil {
		out = append(out, ifElse(s.ExclusiveMaximum, "below ", "maximum ")+number(*s.Maximum))
	}
	if len(s.Enum) > 0 {
		vals := make([]string, len(s.Enum))
		for i, e := range s.Enum {
			vals[i] = code(string(e.Raw))
		}
		out = append(out, "one of "+strings.Join(vals, ", "))
	}
	if s.Pattern != "" {
		out = append(out, "pattern "+code(s.Pattern))
	}
	if s.XListType != nil && *s.XListType != "atomic" {
		t := "list type " + *s.XListType
		if len(s.XListMapKeys) > 0 {
			t += " keyed by " + strings.Join(s.XListMapKeys, ", ")
		}
		out = append(out, t)
	}
	return out
}

// number writes a bound as written in the schema, never in e-notation.
func number(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

func ifElse(c bool, a, b string) string {
	if c {
		return a
	}
	return b
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
