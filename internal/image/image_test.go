package image

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/validate"
)

// These tests assemble images from stand-in binaries (a few bytes each),
// so they run in milliseconds; test/deploy builds the real binary for both
// platforms and checks the result, and imports it into containerd.

const testRef = "ghcr.io/warmer-dev/warmer:v0.0.0-unit"

// fakeBinaries writes one small file per default platform.
func fakeBinaries(t *testing.T) map[string]string {
	t.Helper()
	dir := t.TempDir()
	out := map[string]string{}
	for _, p := range DefaultPlatforms {
		path := filepath.Join(dir, p.Architecture)
		if err := os.WriteFile(path, []byte("binary for "+p.String()), 0o600); err != nil {
			t.Fatal(err)
		}
		out[p.String()] = path
	}
	return out
}

// writeTar assembles and writes the tarball, returning its bytes.
func writeTar(t *testing.T, bins map[string]string, opts Options) []byte {
	t.Helper()
	idx, err := Assemble(bins, opts)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "image.tar")
	if err := WriteOCI(path, idx, testRef); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestReproducible: the same inputs give the same bytes, whatever the
// moment and the files' own times; another creation time gives another
// image.
func TestReproducible(t *testing.T) {
	opts := Options{Version: "v0.0.0-unit", Created: time.Unix(1700000000, 0)}
	bins := fakeBinaries(t)
	first := writeTar(t, bins, opts)
	for _, p := range bins {
		if err := os.Chtimes(p, time.Now(), time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	if second := writeTar(t, bins, opts); !bytes.Equal(first, second) {
		t.Error("two builds of the same input differ")
	}
	opts.Created = opts.Created.Add(time.Second)
	if third := writeTar(t, bins, opts); bytes.Equal(first, third) {
		t.Error("another creation time gives the same tarball: is Created used?")
	}
}

// TestLayout reads the tarball back as an OCI layout and checks what
// containerd, skopeo and crane rely on.
func TestLayout(t *testing.T) {
	created := time.Unix(1700000000, 0)
	dir := untar(t, writeTar(t, fakeBinaries(t), Options{Version: "v0.0.0-unit", Created: created}))
	var top v1.IndexManifest
	readJSON(t, filepath.Join(dir, "index.json"), &top)
	if len(top.Manifests) != 1 {
		t.Fatalf("index.json has %d entries, want 1", len(top.Manifests))
	}
	for _, k := range []string{AnnotationRefName, AnnotationContainerdName} {
		if got := top.Manifests[0].Annotations[k]; got != testRef {
			t.Errorf("index.json annotation %s = %q, want %q", k, got, testRef)
		}
	}
	lp, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := lp.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	nested, err := idx.ImageIndex(top.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	// Every digest and size matches its blob, every layer's diff ID its
	// content.
	if err := validate.Index(nested); err != nil {
		t.Fatalf("the image index does not validate: %v", err)
	}
	im, err := nested.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != len(DefaultPlatforms) {
		t.Fatalf("%d images, want %d", len(im.Manifests), len(DefaultPlatforms))
	}
	for i, d := range im.Manifests {
		if d.ArtifactType != "" {
			t.Errorf("image %d's entry has artifactType %q; tools before OCI 1.1 drop it and change the index digest", i, d.ArtifactType)
		}
		want := DefaultPlatforms[i]
		if d.Platform == nil || !d.Platform.Equals(want) {
			t.Errorf("image %d has platform %v, want %v", i, d.Platform, want)
			continue
		}
		img, err := nested.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		checkImage(t, img, want, created)
	}
}

// checkImage checks one platform's configuration and layer.
func checkImage(t *testing.T, img v1.Image, p v1.Platform, created time.Time) {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != p.OS || cf.Architecture != p.Architecture {
		t.Errorf("%s: config says %s/%s", p, cf.OS, cf.Architecture)
	}
	if cf.Config.User != "65532:65532" || len(cf.Config.Entrypoint) != 1 || cf.Config.Entrypoint[0] != "/warmer" {
		t.Errorf("%s: user %q, entrypoint %v; want 65532:65532 and [/warmer]", p, cf.Config.User, cf.Config.Entrypoint)
	}
	if !cf.Created.Equal(created) {
		t.Errorf("%s: created %v, want %v", p, cf.Created, created)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("%s: %d layers (%v), want 1", p, len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	files := map[string]*tar.Header{}
	bodies := map[string]string{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		files[h.Name], bodies[h.Name] = h, string(b)
	}
	for name, mode := range map[string]int64{"warmer": 0o755, "etc/passwd": 0o644, "etc/group": 0o644, "tmp/": 0o1777} {
		h, ok := files[name]
		switch {
		case !ok:
			t.Errorf("%s: layer lacks %s", p, name)
		case h.Mode != mode || !h.ModTime.Equal(created):
			t.Errorf("%s: %s mode %o time %v, want %o and %v", p, name, h.Mode, h.ModTime, mode, created)
		}
	}
	if bodies["warmer"] != "binary for "+p.String() {
		t.Errorf("%s: /warmer holds %q, not the platform's binary", p, bodies["warmer"])
	}
	if !bytes.Contains([]byte(bodies["etc/passwd"]), []byte("nonroot:x:65532:65532:")) {
		t.Errorf("%s: /etc/passwd lacks the nonroot user:\n%s", p, bodies["etc/passwd"])
	}
}

func TestAssembleNeedsEveryPlatform(t *testing.T) {
	bins := fakeBinaries(t)
	delete(bins, "linux/arm64")
	if _, err := Assemble(bins, Options{Version: "v"}); err == nil {
		t.Error("assembled an index without an arm64 binary")
	}
	if _, err := Assemble(fakeBinaries(t), Options{}); err == nil {
		t.Error("assembled an index without a version")
	}
}

func untar(t *testing.T, b []byte) string {
	t.Helper()
	dir := t.TempDir()
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return dir
		}
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, filepath.FromSlash(h.Name))
		if h.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(path, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func readJSON(t *testing.T, path string, into any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
