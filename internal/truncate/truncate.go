// Package truncate bounds text that goes into objects with size limits
// (status messages, event notes) or into logs: one rule for every caller,
// so that a message cut in one place reads like a message cut in another.
package truncate

import "unicode/utf8"

// Mark ends a string that String cut.
const Mark = "…"

// String returns s if it is at most n bytes long; otherwise its longest
// prefix that, with Mark after it, fits in n bytes, cut on a rune boundary
// so that the result stays valid UTF-8. Bytes, not runes: the API server
// and etcd bound sizes in bytes, and n bytes is never more than n
// characters. With n too small for Mark, the prefix alone is returned.
func String(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n <= 0 {
		return ""
	}
	mark := Mark
	if n < len(mark) {
		mark = ""
	}
	cut := n - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}
