package testbed

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/warmer-dev/warmer/test/testbed/hostcheck"
)

// PauseImage is the sandbox image a real node's containerd uses. Nothing
// pulls it: the node imports a stand-in built from ./test/testbed/pause
// under this name.
const PauseImage = "registry.k8s.io/pause:3.10.2"

// NonRootUID is the user the test bed's images run as.
const NonRootUID = 65532

var goBuilds sync.Map // package -> *goBuild

type goBuild struct {
	once sync.Once
	path string
	err  error
}

// BuildGo compiles the main package pkg (a path from the repo root, such as
// "./test/testbed/pause") once per test binary as a static executable and
// returns its path.
func BuildGo(t TB, pkg string) string {
	t.Helper()
	v, _ := goBuilds.LoadOrStore(pkg, &goBuild{})
	b := v.(*goBuild)
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", "wb-gobin-")
		if err != nil {
			b.err = err
			return
		}
		hostcheck.GuardDir(dir)
		b.path = filepath.Join(dir, filepath.Base(pkg))
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", b.path, pkg)
		cmd.Dir = RepoRoot(t)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("building %s: %w\n%s", pkg, err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// GoImage builds the main package pkg (see BuildGo) and packs it, without
// Docker, as a one-layer image for this machine's platform: the executable
// at /NAME as the entrypoint, run as NonRootUID, with /etc/passwd,
// /etc/group and /tmp.
func GoImage(t TB, pkg string) v1.Image {
	t.Helper()
	bin := BuildGo(t, pkg)
	layer, err := binaryLayer(bin)
	if err != nil {
		t.Fatalf("packing %s: %v", bin, err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", goruntime.GOARCH
	cf.Config.Entrypoint = []string{"/" + filepath.Base(bin)}
	cf.Config.User = fmt.Sprintf("%d:%d", NonRootUID, NonRootUID)
	cf.Config.WorkingDir = "/"
	cf.Config.Labels = map[string]string{"dev.warmer.testbed": "true"}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	return img
}

// binaryLayer is a layer holding bin at the root and the few files a
// program run as a named user expects.
func binaryLayer(bin string) (v1.Layer, error) {
	exe, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	// A fixed time keeps the layer's digest the same for the same binary.
	mtime := time.Unix(0, 0)
	for _, dir := range []struct {
		name string
		mode int64
	}{{"etc/", 0o755}, {"tmp/", 0o1777}} {
		if err := tw.WriteHeader(&tar.Header{Name: dir.name, Mode: dir.mode, Typeflag: tar.TypeDir, ModTime: mtime}); err != nil {
			return nil, err
		}
	}
	files := []struct {
		name string
		mode int64
		data []byte
	}{
		{"etc/passwd", 0o644, fmt.Appendf(nil, "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/tmp:/sbin/nologin\n", NonRootUID, NonRootUID)},
		{"etc/group", 0o644, fmt.Appendf(nil, "root:x:0:\nnonroot:x:%d:\n", NonRootUID)},
		{filepath.Base(bin), 0o755, exe},
	}
	for _, f := range files {
		hdr := &tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.data)), Typeflag: tar.TypeReg, ModTime: mtime}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	})
}

// WriteImageTar writes img, tagged ref, as a tarball that ctr (and so
// Containerd.ImportImage) imports, and returns its path in dir.
func WriteImageTar(t TB, img v1.Image, ref, dir string) string {
	t.Helper()
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatalf("parsing %s: %v", ref, err)
	}
	path := filepath.Join(dir, fmt.Sprintf("image-%s.tar", randomToken()))
	if err := tarball.WriteToFile(path, tag, img); err != nil {
		t.Fatalf("writing %s: %v", path, err)
	}
	return path
}
