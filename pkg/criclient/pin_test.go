package criclient

import "testing"

func TestAtLeast(t *testing.T) {
	for _, c := range []struct {
		version string
		want    bool
	}{
		{"v2.4.2", true},
		{"1.7.0", true},
		{"v1.7.27", true},
		{"1.6.20~ds1", false},
		{"v1.6.38", false},
		{"0.9", false},
		{"1.10.1", true},
		{"v1.7.0-rc.1", true},
		{"unknown", true}, // unreadable: the images API check decides
		{"", true},
	} {
		if got := atLeast(c.version, 1, 7); got != c.want {
			t.Errorf("atLeast(%q, 1, 7) = %v, want %v", c.version, got, c.want)
		}
	}
}
