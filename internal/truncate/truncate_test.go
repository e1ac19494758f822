package truncate

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestString(t *testing.T) {
	tests := []struct {
		s    string
		n    int
		want string
	}{
		{"", 5, ""},
		{"short", 5, "short"},
		{"longer", 5, "lo…"},
		{"€€€", 8, "€" + Mark}, // 9 bytes; a second € would end past 8 with the mark
		{"a€€", 6, "a" + Mark}, // the cut falls inside the first €
		{"abcdef", 2, "ab"},    // no room for the mark
		{"€€", 2, ""},          // nor for one rune
		{"abc", 0, ""},
		{"abc", -1, ""},
	}
	for _, tt := range tests {
		if got := String(tt.s, tt.n); got != tt.want {
			t.Errorf("String(%q, %d) = %q, want %q", tt.s, tt.n, got, tt.want)
		}
	}
}

// FuzzString checks the promises for any input: at most n bytes, valid
// UTF-8 when the input is, a prefix of the input before the mark, and the
// input itself when it fits.
func FuzzString(f *testing.F) {
	for _, s := range []string{"", "a", "€€€€", strings.Repeat("ab€", 400)} {
		f.Add(s, 10)
	}
	f.Fuzz(func(t *testing.T, s string, n int) {
		n %= 2048
		got := String(s, n)
		if len(got) > max(n, 0) {
			t.Fatalf("String(%q, %d) = %d bytes", s, n, len(got))
		}
		if utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Fatalf("String(%q, %d) = %q, not valid UTF-8", s, n, got)
		}
		if len(s) <= n && got != s {
			t.Fatalf("String(%q, %d) changed a string that fits", s, n)
		}
		if !strings.HasPrefix(s, strings.TrimSuffix(got, Mark)) {
			t.Fatalf("String(%q, %d) = %q, not a prefix", s, n, got)
		}
	})
}
