package testbed

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"testing"
)

// TestBombImage: the bomb's layer is a valid tar of one file of zeros of
// the size asked, its digests the real ones, and it costs a sliver of
// that to fetch.
func TestBombImage(t *testing.T) {
	img := BombImage(t, 100<<20) // rounded up to 128 MiB
	ls, err := img.Layers()
	if err != nil || len(ls) != 1 {
		t.Fatalf("layers %v, %v; want one", ls, err)
	}
	size, _ := ls[0].Size()
	if size > 1<<20 {
		t.Errorf("the layer takes %d bytes to fetch, want under 1 MiB", size)
	}
	rc, err := ls[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	tr := tar.NewReader(io.TeeReader(rc, h))
	hdr, err := tr.Next()
	if err != nil || hdr.Name != "zeros" || hdr.Size != 128<<20 {
		t.Fatalf("first entry %+v, %v; want zeros of 128 MiB", hdr, err)
	}
	if _, err := io.Copy(io.Discard, tr); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Next(); err != io.EOF {
		t.Fatalf("after the file: %v, want the end of the archive", err)
	}
	_, _ = io.Copy(h, rc)
	diffID, _ := ls[0].DiffID()
	if got := hex.EncodeToString(h.Sum(nil)); got != diffID.Hex {
		t.Errorf("the tar's digest is %s, the layer says %s", got, diffID.Hex)
	}
	t.Logf("128 MiB unpacked from %d bytes", size)
}
