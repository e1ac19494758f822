package agent

import "testing"

// TestSignalWritesAgain walks the cache lag BenchmarkNodeSignals found:
// the agent's passes read its Node from a cache that shows its own
// writes late.
func TestSignalWritesAgain(t *testing.T) {
	var w signalWrites
	if w.again("1", w.condition, "") {
		t.Fatal("nothing written yet, yet a write is skipped")
	}
	// A pass reads version 1, writes the labels (2), then the condition (3).
	w.wrote("1", "2")
	w.labels = "L1"
	w.wrote("1", "3")
	w.condition = "M1"
	for _, c := range []struct {
		name, rv, wrote, what string
		want                  bool
	}{
		{"the cache still at the read version: the same condition waits", "1", w.condition, "M1", true},
		{"the cache showing the labels' write only: the same condition waits", "2", w.condition, "M1", true},
		{"the cache still at the read version: the same labels wait", "1", w.labels, "L1", true},
		{"a new condition is written", "1", w.condition, "M2", false},
		{"the cache at the condition's own write: it holds both, a repeat would be written", "3", w.condition, "M1", false},
		{"a version from someone else: written", "7", w.condition, "M1", false},
	} {
		if got := w.again(c.rv, c.wrote, c.what); got != c.want {
			t.Errorf("%s: again(%q, %q, %q) = %v", c.name, c.rv, c.wrote, c.what, got)
		}
	}
	// The next pass, still reading 1, writes M2 (4): version 3, with M1,
	// is stale now, and M2 waits there.
	w.wrote("1", "4")
	w.condition = "M2"
	if !w.again("3", w.condition, "M2") {
		t.Error("the cache at the earlier write (3) repeats M2")
	}
	for i := range 40 {
		w.wrote("1", string(rune('a'+i)))
	}
	if len(w.stale) > staleKept {
		t.Errorf("%d stale versions kept, at most %d", len(w.stale), staleKept)
	}
}
