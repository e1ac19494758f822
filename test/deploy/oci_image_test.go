package deploy

import (
	"archive/tar"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/validate"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/warmer-dev/warmer/internal/image"
	"github.com/warmer-dev/warmer/test/testbed"
)

// What `make image` makes, checked as built: the image is assembled by
// internal/image for both platforms from the real source, twice (once from
// a copy of the source elsewhere) to show the digest depends on the source
// only, then read back and imported into a real containerd.

const (
	imageVersion = "v0.0.0-ocitest"
	imageRef     = "ghcr.io/warmer-dev/warmer:" + imageVersion
)

// TestOCIImage builds the release image without Docker and checks it.
func TestOCIImage(t *testing.T) {
	root := testbed.RepoRoot(t)
	created := time.Unix(1767225600, 0) // as SOURCE_DATE_EPOCH would give it
	tarPath := filepath.Join(t.TempDir(), "warmer-image.tar")
	idx, digest := buildOCI(t, root, created, tarPath)

	t.Run("reproducible from another checkout", func(t *testing.T) {
		_, again := buildOCI(t, copySource(t, root), created, filepath.Join(t.TempDir(), "again.tar"))
		if again != digest {
			t.Errorf("the same source gave index %s, then %s", digest, again)
		}
	})
	t.Run("layout", func(t *testing.T) { checkOCILayout(t, tarPath, digest, created) })
	t.Run("same build flags as the Dockerfile", checkFlagsMatchDockerfile)
	t.Run("containerd imports it", func(t *testing.T) { checkImport(t, tarPath, hostConfig(t, idx)) })
	t.Run("pushed as crane pushes it, containerd pulls it", func(t *testing.T) { checkPushPull(t, tarPath, digest) })
}

// buildOCI builds the image from the module at dir, writes the tarball and
// returns the index and its digest.
func buildOCI(t *testing.T, dir string, created time.Time, out string) (v1.ImageIndex, v1.Hash) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	idx, err := image.Build(ctx, image.Options{Dir: dir, Version: imageVersion, Created: created})
	if err != nil {
		t.Fatal(err)
	}
	if err := image.WriteOCI(out, idx, imageRef); err != nil {
		t.Fatal(err)
	}
	d, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return idx, d
}

// hostConfig is the configuration digest of idx's image for this
// machine's platform: the image ID a runtime here reports.
func hostConfig(t *testing.T, idx v1.ImageIndex) v1.Hash {
	t.Helper()
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range im.Manifests {
		if d.Platform.OS == "linux" && d.Platform.Architecture == runtime.GOARCH {
			img, err := idx.Image(d.Digest)
			if err != nil {
				t.Fatal(err)
			}
			h, err := img.ConfigName()
			if err != nil {
				t.Fatal(err)
			}
			return h
		}
	}
	t.Fatalf("no image for linux/%s", runtime.GOARCH)
	return v1.Hash{}
}

// copySource copies what the binary is built from (what the Dockerfile
// copies) to a directory of another name and depth.
func copySource(t *testing.T, root string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "elsewhere", "warmer-copy")
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("cp", "-a", "--parents", "go.mod", "go.sum", "api", "cmd", "controllers", "internal", "pkg", dst)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("copying the source: %v\n%s", err, out)
	}
	return dst
}

// checkOCILayout reads the tarball as an OCI layout: one entry naming the
// image, an index of linux/amd64 and linux/arm64, each a non-root image
// whose /warmer is a static binary for its platform.
func checkOCILayout(t *testing.T, tarPath string, digest v1.Hash, created time.Time) {
	dir := t.TempDir()
	if out, err := exec.Command("tar", "-xf", tarPath, "-C", dir).CombinedOutput(); err != nil {
		t.Fatalf("untar: %v\n%s", err, out)
	}
	lp, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	top, err := lp.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	tm, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(tm.Manifests) != 1 || tm.Manifests[0].Digest != digest || tm.Manifests[0].Annotations[image.AnnotationRefName] != imageRef {
		t.Fatalf("index.json %+v, want one entry %s named %s", tm.Manifests, digest, imageRef)
	}
	idx, err := top.ImageIndex(digest)
	if err != nil {
		t.Fatal(err)
	}
	if err := validate.Index(idx); err != nil {
		t.Fatalf("the index does not validate: %v", err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var platforms []string
	for _, d := range im.Manifests {
		platforms = append(platforms, d.Platform.String())
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		checkPlatformImage(t, img, *d.Platform, created)
	}
	if want := []string{"linux/amd64", "linux/arm64"}; !slices.Equal(platforms, want) {
		t.Errorf("platforms %v, want %v", platforms, want)
	}
}

// checkPlatformImage checks one platform's configuration and binary.
func checkPlatformImage(t *testing.T, img v1.Image, p v1.Platform, created time.Time) {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	// Numeric and not 0, so that runAsNonRoot admits it without a lookup;
	// the Dockerfile's USER is the same (TestImageFinalStage).
	if !regexp.MustCompile(`^[1-9][0-9]*:[1-9][0-9]*$`).MatchString(cf.Config.User) || cf.Config.User != dockerfileUser(t) {
		t.Errorf("%s: user %q, want the Dockerfile's numeric non-root %q", p, cf.Config.User, dockerfileUser(t))
	}
	if !slices.Equal(cf.Config.Entrypoint, []string{"/warmer"}) || cf.OS != p.OS || cf.Architecture != p.Architecture {
		t.Errorf("%s: entrypoint %v, platform %s/%s", p, cf.Config.Entrypoint, cf.OS, cf.Architecture)
	}
	if !cf.Created.Equal(created) {
		t.Errorf("%s: created %v, want %v", p, cf.Created.Time, created)
	}
	bin := extractBinary(t, img)
	checkStatic(t, bin, machines[p.Architecture])
	if p.Architecture == runtime.GOARCH {
		checkStamp(t, bin, imageVersion)
	}
}

// extractBinary writes the image's /warmer to a file and returns its path.
func extractBinary(t *testing.T, img v1.Image) string {
	t.Helper()
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("%d layers (%v), want 1", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			t.Fatal("the layer has no /warmer")
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Name != "warmer" {
			continue
		}
		path := filepath.Join(t.TempDir(), "warmer")
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o755)
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.Copy(f, tr)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatal(err)
		}
		return path
	}
}

// dockerfileUser is the final stage's USER.
func dockerfileUser(t *testing.T) string {
	t.Helper()
	user := ""
	for _, ins := range dockerfile(t) {
		if f := strings.Fields(ins); f[0] == "USER" {
			user = f[1]
		}
	}
	return user
}

// checkFlagsMatchDockerfile: the Dockerfile's go build and internal/image's
// use the same flags that shape the binary, so both images hold the same
// program.
func checkFlagsMatchDockerfile(t *testing.T) {
	var run string
	for _, ins := range dockerfile(t) {
		if strings.HasPrefix(ins, "RUN ") && strings.Contains(ins, "go build") {
			run = ins
		}
	}
	m := regexp.MustCompile(`-ldflags "([^"]*)"`).FindStringSubmatch(run)
	if m == nil {
		t.Fatalf("no -ldflags \"...\" in the Dockerfile's build: %s", run)
	}
	dockerLd := strings.ReplaceAll(m[1], "${VERSION}", "V")
	args := image.GoBuildArgs("V", "out")
	ld := args[slices.Index(args, "-ldflags")+1]
	if dockerLd != ld {
		t.Errorf("-ldflags: the Dockerfile has %q, internal/image %q", dockerLd, ld)
	}
	for _, want := range []string{"CGO_ENABLED=0", "-trimpath"} {
		if !strings.Contains(run, want) {
			t.Errorf("the Dockerfile's build lacks %s", want)
		}
	}
	if !slices.Contains(args, "-trimpath") {
		t.Error("internal/image builds without -trimpath")
	}
}

// checkPushPull pushes the tarball to a real registry the way the
// documented `crane push DIR REF` does with an OCI layout of one entry (the
// entry's index, its digest unchanged), and has containerd's CRI pull it:
// what a node does with a published release.
func checkPushPull(t *testing.T, tarPath string, digest v1.Hash) {
	dir := t.TempDir()
	if out, err := exec.Command("tar", "-xf", tarPath, "-C", dir).CombinedOutput(); err != nil {
		t.Fatalf("untar: %v\n%s", err, out)
	}
	lp, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := lp.ImageIndex(digest)
	if err != nil {
		t.Fatal(err)
	}
	reg := testbed.StartRegistry(t, testbed.RegistryOptions{Name: "release"})
	ref, err := name.ParseReference(reg.Host+"/warmer-dev/warmer:"+imageVersion, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(ref, idx); err != nil {
		t.Fatalf("pushing: %v", err)
	}
	ctd := testbed.StartContainerd(t, "pull-node")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	svc := ctd.ImageService(t)
	if _, err := svc.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref.String()}}); err != nil {
		t.Fatalf("CRI pull of %s: %v\ncontainerd:\n%s", ref, err, ctd.Log(20))
	}
	st, err := svc.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: ref.String()}})
	if err != nil || st.GetImage() == nil {
		t.Fatalf("image status after the pull: %v, %v", st, err)
	}
	want := reg.Host + "/warmer-dev/warmer@" + digest.String()
	if !slices.Contains(st.GetImage().GetRepoDigests(), want) {
		t.Errorf("repo digests %v lack %s: the registry holds another index than the tarball", st.GetImage().GetRepoDigests(), want)
	}
}

// checkImport imports the tarball into a real containerd with ctr, as a
// node's operator would, and checks that its CRI then knows the image by
// its name, as this machine's platform's image, so a Pod naming it runs
// without a pull.
func checkImport(t *testing.T, tarPath string, config v1.Hash) {
	ctd := testbed.StartContainerd(t, "image-node")
	ctr, err := exec.LookPath("ctr")
	if err != nil {
		t.Fatalf("ctr (containerd's client, installed with it) not found: %v", err)
	}
	out, err := exec.Command(ctr, "--address", ctd.Socket, "-n", "k8s.io", "images", "import",
		"--snapshotter", ctd.Snapshotter(), tarPath).CombinedOutput()
	if err != nil {
		t.Fatalf("ctr images import: %v\n%s\ncontainerd:\n%s", err, out, ctd.Log(30))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	svc := ctd.ImageService(t)
	var st *runtimeapi.ImageStatusResponse
	// The CRI plugin learns of imported images from containerd's events.
	for {
		st, err = svc.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: imageRef}})
		if err == nil && st.GetImage() != nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("CRI does not know %s after ctr imported it (%v); ctr said:\n%s", imageRef, err, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	img := st.GetImage()
	if !slices.Contains(img.GetRepoTags(), imageRef) {
		t.Errorf("repo tags %v lack %s", img.GetRepoTags(), imageRef)
	}
	if img.GetId() != config.String() {
		t.Errorf("CRI reports image ID %s, want linux/%s's configuration %s", img.GetId(), runtime.GOARCH, config)
	}
	if u := img.GetUid(); u == nil || u.GetValue() != image.UID {
		t.Errorf("CRI reports the image's user as %v, want uid %d", u, image.UID)
	}
}
