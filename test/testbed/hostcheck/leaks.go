package hostcheck

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"strings"
)

// RandomPassword is a registry password of 24 hex digits, random so that
// finding it in a log means it was written there.
func RandomPassword(t TB) string {
	t.Helper()
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// A Needle is one form of a secret that must never be shown.
type Needle struct{ Name, Value string }

// LeakForms are the forms in which a password could leak: as written, in
// base64 alone, and as docker's auth field (user:password in base64), each
// in the standard, raw and URL encodings.
func LeakForms(name, user, password string) []Needle {
	out := []Needle{{name, password}}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding} {
		out = append(out, Needle{name + " in base64", enc.EncodeToString([]byte(password))},
			Needle{name + " as an auth field", enc.EncodeToString([]byte(user + ":" + password))})
	}
	return out
}

// Errorer is the part of testing.TB SearchLeaks needs.
type Errorer interface {
	Helper()
	Errorf(format string, args ...any)
}

// SearchLeaks reports every needle found in shown (each text by what it
// is). It first checks that each text holds what wants says the test made
// warmer write there, and is not empty: a search of texts that missed the
// failure paths, where a leak is likeliest, would prove little.
func SearchLeaks(t Errorer, shown map[string]string, wants map[string][]string, needles []Needle) {
	t.Helper()
	for what, want := range wants {
		for _, w := range want {
			if !strings.Contains(shown[what], w) {
				t.Errorf("%s lacks %q: the search would prove little", what, w)
			}
		}
	}
	for what, text := range shown {
		if text == "" {
			t.Errorf("%s is empty: the search would prove nothing", what)
		}
		for _, n := range needles {
			if strings.Contains(text, n.Value) {
				t.Errorf("%s holds %s", what, n.Name)
			}
		}
	}
}
