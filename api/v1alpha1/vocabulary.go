package v1alpha1

import _ "embed"

// ConditionsSource is conditions.go as written: its doc comments say what
// each condition type and reason means and what to do about it. The
// reference pages and kubectl warmer read them from here
// (internal/vocabulary), so each is written once.
//
//go:embed conditions.go
var ConditionsSource []byte
