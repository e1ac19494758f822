package cluster

import (
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/warmer-dev/warmer/test/testbed"
)

// earlierCommit is the release an upgrade starts from: main as it stood
// before warmer had a release procedure (2026-11-27), with its own CRDs,
// policies and agent. It has no make release, so its artifacts are made
// as that tree made them: the image with its make push (hack/image), and
// install.yaml as its make deploy renders config/default running that
// image (hack/deploy-overlay.sh). When a tagged release exists, the
// upgrade starts from that tag instead.
const earlierCommit = "0593df5a5e1224254b1223b58c4c5e445627bcb7"

// earlierRelease makes and publishes earlierCommit's artifacts to
// registry, for this machine's platform, at earlierVersion.
func earlierRelease(t *testing.T, registry string) releaseArtifacts {
	t.Helper()
	src := t.TempDir()
	// git archive reads the commit without touching the repository's
	// worktrees; a clone without that commit (a shallow one) fails here.
	archive := exec.Command("sh", "-c", `git -C "$1" archive "$2" | tar -x -C "$3"`, "sh", testbed.RepoRoot(t), earlierCommit, src)
	if out, err := archive.CombinedOutput(); err != nil {
		t.Fatalf("extracting commit %s (needs a full clone): %v\n%s", earlierCommit, err, out)
	}
	tag := registry + "/warmer:" + earlierVersion
	build := exec.Command("go", "run", "./hack/image", "--image", tag, "--version", earlierVersion,
		"--out", filepath.Join(src, "image.tar"), "--platforms", "linux/"+goruntime.GOARCH, "--push")
	build.Dir = src
	build.Env = append(os.Environ(), "SOURCE_DATE_EPOCH=0", "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building and pushing %s's image: %v\n%s", earlierCommit, err, out)
	}
	ref, err := name.ParseReference(tag)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := remote.Head(ref)
	if err != nil {
		t.Fatalf("reading the digest of %s: %v", tag, err)
	}
	image := registry + "/warmer@" + desc.Digest.String()
	overlay := filepath.Join(src, "bin", "deploy")
	if out, err := exec.Command(filepath.Join(src, "hack", "deploy-overlay.sh"), image, overlay).CombinedOutput(); err != nil {
		t.Fatalf("writing %s's deploy overlay: %v\n%s", earlierCommit, err, out)
	}
	install, err := exec.Command("kubectl", "kustomize", overlay).Output()
	if err != nil {
		t.Fatalf("rendering %s's config/default: %v", earlierCommit, err)
	}
	if !strings.Contains(string(install), "image: "+image) {
		t.Fatalf("%s's install.yaml does not run %s", earlierCommit, image)
	}
	dist := filepath.Join(src, "dist")
	if err := os.MkdirAll(dist, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dist, "install.yaml"), install, 0o600); err != nil {
		t.Fatal(err)
	}
	return releaseArtifacts{version: earlierVersion, dist: dist, image: image}
}
