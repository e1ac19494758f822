package bytesize

import "testing"

func TestIEC(t *testing.T) {
	for _, c := range []struct {
		n    int64
		want string
	}{
		{0, "0 B"}, {1023, "1023 B"}, {1024, "1.0 KiB"}, {1536, "1.5 KiB"},
		{12 << 20, "12 MiB"}, {3<<30 + 200<<20, "3.2 GiB"}, {1 << 62, "4.0 EiB"},
	} {
		if got := IEC(c.n); got != c.want {
			t.Errorf("IEC(%d) = %q, want %q", c.n, got, c.want)
		}
	}
}
