package criclient_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/warmer-dev/warmer/pkg/criclient"
	"github.com/warmer-dev/warmer/test/testbed"
)

// These tests run the client against a real containerd (see test/testbed):
// the unit tests' fake server shows what the client does with answers, these
// show that the answers are the ones containerd really gives.

// skipShort skips tests that need the test bed under -short.
func skipShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs the test bed (real containerd and registry); skipped with -short")
	}
}

// testContext bounds a test's calls generously: the test bed's machines
// have two shared cores.
func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// connect opens the agent's client on endpoint with a short call timeout.
func connect(t *testing.T, endpoint string) *criclient.Client {
	t.Helper()
	c, err := criclient.New(testContext(t), criclient.Config{Endpoint: endpoint, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatalf("New(%s): %v", endpoint, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// listed reports whether ListImages names ref among its tags or digests.
func listed(t *testing.T, c *criclient.Client, ref string) bool {
	t.Helper()
	imgs, err := c.ListImages(testContext(t))
	if err != nil {
		t.Fatalf("ListImages: %v", err)
	}
	for _, img := range imgs {
		if slices.Contains(img.GetRepoTags(), ref) || slices.Contains(img.GetRepoDigests(), ref) {
			return true
		}
	}
	return false
}

// repoDigest is img's "repository@digest" form.
func repoDigest(img testbed.Image) string {
	return img.Ref[:strings.LastIndexByte(img.Ref, ':')] + "@" + img.Digest
}

// TestClientOnContainerd walks one image through every call the agent
// makes: pull, status, list, filesystem info, removal.
func TestClientOnContainerd(t *testing.T) {
	skipShort(t)
	reg := testbed.StartRegistry(t, testbed.RegistryOptions{Name: "cri"})
	img := reg.PushRandom(t, "test/small:v1", testbed.ImageOptions{LayerSize: testbed.MB})
	ctd := testbed.StartContainerd(t, "node-c")
	c := connect(t, ctd.Endpoint)

	t.Run("Version", func(t *testing.T) {
		v, err := c.Version(testContext(t))
		if err != nil {
			t.Fatal(err)
		}
		if v.GetRuntimeName() != "containerd" || v.GetRuntimeApiVersion() != "v1" || v.GetRuntimeVersion() == "" {
			t.Errorf("Version = %+v, want containerd speaking CRI v1", v)
		}
		if got := c.RuntimeVersion().GetRuntimeVersion(); got != v.GetRuntimeVersion() {
			t.Errorf("RuntimeVersion() = %q, want New's answer %q", got, v.GetRuntimeVersion())
		}
	})
	t.Run("ImageStatus of an absent image", func(t *testing.T) {
		got, err := c.ImageStatus(testContext(t), img.Ref)
		if err != nil || got != nil {
			t.Fatalf("ImageStatus = %v, %v; want nil, nil", got, err)
		}
	})
	var imageRef string
	if !t.Run("PullImage", func(t *testing.T) {
		var err error
		if imageRef, err = c.PullImage(testContext(t), img.Ref, nil); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(imageRef, "sha256:") {
			t.Errorf("image ref %q, want the config digest", imageRef)
		}
	}) {
		t.FailNow() // the rest needs the image
	}
	t.Run("ImageStatus of a present image", func(t *testing.T) {
		checkStatus(t, c, img, imageRef)
	})
	t.Run("ListImages", func(t *testing.T) {
		for _, ref := range []string{img.Ref, repoDigest(img)} {
			if !listed(t, c, ref) {
				t.Errorf("%s not listed", ref)
			}
		}
	})
	t.Run("ImageFsInfo", func(t *testing.T) {
		checkImageFs(t, c, ctd.Dir)
	})
	t.Run("RemoveImage", func(t *testing.T) {
		ctx := testContext(t)
		if err := c.RemoveImage(ctx, img.Ref); err != nil {
			t.Fatal(err)
		}
		if got, err := c.ImageStatus(ctx, imageRef); err != nil || got != nil {
			t.Errorf("ImageStatus after removal = %v, %v; want nil, nil", got, err)
		}
		if listed(t, c, img.Ref) || listed(t, c, repoDigest(img)) {
			t.Errorf("%s still listed after removal", img.Ref)
		}
		if err := c.RemoveImage(ctx, img.Ref); err != nil {
			t.Errorf("removing an absent image: %v, want success", err)
		}
	})
	t.Run("errors", func(t *testing.T) {
		checkErrors(t, c, reg)
	})
}

// checkStatus checks ImageStatus by tag and by ID against what was pushed.
func checkStatus(t *testing.T, c *criclient.Client, img testbed.Image, imageRef string) {
	t.Helper()
	for _, ref := range []string{img.Ref, imageRef, repoDigest(img)} {
		got, err := c.ImageStatus(testContext(t), ref)
		if err != nil || got == nil {
			t.Fatalf("ImageStatus(%s) = %v, %v; want the image", ref, got, err)
		}
		if got.GetId() != imageRef {
			t.Errorf("ImageStatus(%s).Id = %s, want %s", ref, got.GetId(), imageRef)
		}
		if !slices.Contains(got.GetRepoTags(), img.Ref) || !slices.Contains(got.GetRepoDigests(), repoDigest(img)) {
			t.Errorf("ImageStatus(%s) names %v %v, want %s and %s", ref, got.GetRepoTags(), got.GetRepoDigests(), img.Ref, repoDigest(img))
		}
		// containerd counts manifest and config too: a little above the
		// layers, never below.
		if got.GetSize() < uint64(img.Size) || got.GetSize() > uint64(img.Size)+testbed.MB {
			t.Errorf("ImageStatus(%s).Size = %d, want about %d", ref, got.GetSize(), img.Size)
		}
	}
}

// checkImageFs waits for containerd's periodic usage figure (refreshed every
// second in the test bed) to count the pulled image, and checks that the
// mountpoint is containerd's own root: the disk guard statfs-es it.
func checkImageFs(t *testing.T, c *criclient.Client, ctdDir string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		info, err := c.ImageFsInfo(testContext(t))
		if err != nil {
			t.Fatal(err)
		}
		fss := info.GetImageFilesystems()
		if len(fss) == 0 {
			t.Fatalf("ImageFsInfo lists no image filesystem: %v", info)
		}
		mp := fss[0].GetFsId().GetMountpoint()
		if !strings.HasPrefix(mp, filepath.Join(ctdDir, "root")+"/") {
			t.Fatalf("mountpoint %q is not under containerd's root %s", mp, ctdDir)
		}
		if fss[0].GetUsedBytes().GetValue() > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("ImageFsInfo still reports 0 bytes used after a pull: %v", info)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// checkErrors checks the gRPC codes containerd's refusals carry, which the
// engine classifies by.
func checkErrors(t *testing.T, c *criclient.Client, reg *testbed.Registry) {
	t.Helper()
	tests := []struct {
		name string
		call func(context.Context) error
		want codes.Code
	}{
		{"missing tag", pull(c, reg.Ref("test/small:nope")), codes.NotFound},
		{"missing repository", pull(c, reg.Ref("test/none:v1")), codes.NotFound},
		// containerd says Unknown for a bad name: only the message tells.
		{"malformed reference", pull(c, reg.Ref("Test/UPPER:v1")), codes.Unknown},
		// Refused by the client before any call.
		{"empty reference to PullImage", pull(c, " "), codes.InvalidArgument},
		{"empty reference to ImageStatus", func(ctx context.Context) error { _, err := c.ImageStatus(ctx, ""); return err }, codes.InvalidArgument},
		{"empty reference to RemoveImage", func(ctx context.Context) error { return c.RemoveImage(ctx, "") }, codes.InvalidArgument},
		{"cancelled pull", func(ctx context.Context) error {
			ctx, cancel := context.WithCancel(ctx)
			cancel()
			_, err := c.PullImage(ctx, reg.Ref("test/small:v1"), nil)
			return err
		}, codes.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call(testContext(t))
			if err == nil || status.Code(err) != tt.want {
				t.Fatalf("got %v (code %v), want code %v", err, status.Code(err), tt.want)
			}
		})
	}
}

func pull(c *criclient.Client, ref string) func(context.Context) error {
	return func(ctx context.Context) error {
		_, err := c.PullImage(ctx, ref, nil)
		return err
	}
}

// TestClientWhenContainerdStops checks that every call reports
// Unavailable while containerd is down, whether it stopped or crashed,
// and that the same client works again once containerd is back: the agent
// keeps one client across runtime restarts (upgrades, crashes).
func TestClientWhenContainerdStops(t *testing.T) {
	skipShort(t)
	ctd := testbed.StartContainerd(t, "node-s")
	c := connect(t, ctd.Endpoint)
	for _, tt := range []struct {
		name string
		stop func()
	}{{"stopped", ctd.Stop}, {"killed", ctd.Kill}} {
		t.Run(tt.name, func(t *testing.T) {
			tt.stop()
			checkUnavailable(t, c)
			if _, err := criclient.New(testContext(t), criclient.Config{Endpoint: ctd.Endpoint, Timeout: 5 * time.Second}); status.Code(err) != codes.Unavailable {
				t.Errorf("New on a stopped runtime: %v, want Unavailable", err)
			}
			ctd.Start()
			waitVersion(t, c)
		})
	}
}

// checkUnavailable calls everything the agent uses on a runtime that is down.
func checkUnavailable(t *testing.T, c *criclient.Client) {
	t.Helper()
	const ref = "127.0.0.1:1/test/small:v1"
	calls := map[string]func(context.Context) error{
		"Version":     func(ctx context.Context) error { _, err := c.Version(ctx); return err },
		"ListImages":  func(ctx context.Context) error { _, err := c.ListImages(ctx); return err },
		"ImageStatus": func(ctx context.Context) error { _, err := c.ImageStatus(ctx, ref); return err },
		"PullImage":   pull(c, ref),
		"RemoveImage": func(ctx context.Context) error { return c.RemoveImage(ctx, ref) },
		"ImageFsInfo": func(ctx context.Context) error { _, err := c.ImageFsInfo(ctx); return err },
	}
	for name, call := range calls {
		err := call(testContext(t))
		if status.Code(err) != codes.Unavailable {
			t.Errorf("%s on a stopped runtime: %v, want Unavailable", name, err)
		}
		if err == nil || !strings.HasPrefix(err.Error(), name+": ") {
			t.Errorf("%s: error %v does not name its call", name, err)
		}
	}
}

// waitVersion waits for the client to reach the restarted runtime. gRPC
// reconnects with back-off (1 s, growing), so this can take seconds.
func waitVersion(t *testing.T, c *criclient.Client) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, err := c.Version(testContext(t))
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("client never reached the restarted runtime: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
