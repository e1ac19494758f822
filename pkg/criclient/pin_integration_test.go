package criclient_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/warmer-dev/warmer/pkg/criclient"
	"github.com/warmer-dev/warmer/test/testbed"
)

// pinnedInCRI reports whether ListImages says the image named ref is
// pinned: what the kubelet's garbage collector reads.
func pinnedInCRI(t *testing.T, c *criclient.Client, ref string) bool {
	t.Helper()
	imgs, err := c.ListImages(testContext(t))
	if err != nil {
		t.Fatalf("ListImages: %v", err)
	}
	for _, img := range imgs {
		if slices.Contains(img.GetRepoTags(), ref) || slices.Contains(img.GetRepoDigests(), ref) {
			return img.GetPinned()
		}
	}
	t.Fatalf("%s not listed", ref)
	return false
}

// TestPinnerOnContainerd2 pins, marks and unpins on a real containerd 2.x
// and reads the result as the kubelet does, through CRI: warmer's pin shows
// as pinned; a pin someone else made is neither marked nor removed.
func TestPinnerOnContainerd2(t *testing.T) {
	skipShort(t)
	reg := testbed.StartRegistry(t, testbed.RegistryOptions{Name: "pin"})
	mine := reg.PushRandom(t, "test/mine:v1", testbed.ImageOptions{LayerSize: testbed.MB})
	theirs := reg.PushRandom(t, "test/theirs:v1", testbed.ImageOptions{LayerSize: testbed.MB})
	ctd := testbed.StartContainerd(t, "node-p", testbed.WithContainerd2(t))
	c := connect(t, ctd.Endpoint)
	ctx := testContext(t)
	for _, img := range []testbed.Image{mine, theirs} {
		if _, err := c.PullImage(ctx, img.Ref, nil); err != nil {
			t.Fatal(err)
		}
	}
	p, err := c.Pinner(ctx)
	if err != nil {
		t.Fatalf("Pinner on containerd %s: %v", c.RuntimeVersion().GetRuntimeVersion(), err)
	}
	if pinnedInCRI(t, c, mine.Ref) {
		t.Fatal("a freshly pulled image is pinned")
	}

	pin := func(ref string, want criclient.PinResult) {
		t.Helper()
		if got, err := p.Pin(ctx, ref); err != nil || got != want {
			t.Errorf("Pin(%s) = %v, %v; want %v", ref, got, err, want)
		}
	}
	pin(mine.Ref, criclient.Pinned)
	testbed.Eventually(t, 10*testbed.BusyMargin, "CRI reporting the pin", func() error {
		if !pinnedInCRI(t, c, mine.Ref) {
			return errors.New("not pinned in ListImages")
		}
		return nil
	})
	pin(mine.Ref, criclient.AlreadyMine)
	if _, err := ctd.Ctr("-n", "k8s.io", "images", "label", theirs.Ref, criclient.PinLabel+"="+criclient.PinValue); err != nil {
		t.Fatal(err)
	}
	pin(theirs.Ref, criclient.PinnedByOther)
	pin("127.0.0.1:1/absent:v1", criclient.NoSuchImage)
	if got, err := p.Mine(ctx); err != nil || !slices.Equal(got, []string{mine.Ref}) {
		t.Errorf("Mine() = %v, %v; want only %s", got, err, mine.Ref)
	}
	checkUnpin(t, c, p, mine.Ref, theirs.Ref)
}

// checkUnpin unpins mine, pinned by warmer, and leaves theirs, pinned by
// hand.
func checkUnpin(t *testing.T, c *criclient.Client, p *criclient.Pinner, mine, theirs string) {
	ctx := testContext(t)
	if unpinned, err := p.Unpin(ctx, theirs); err != nil || unpinned {
		t.Errorf("Unpin of someone else's pin = %v, %v; want false, nil", unpinned, err)
	}
	if unpinned, err := p.Unpin(ctx, mine); err != nil || !unpinned {
		t.Errorf("Unpin of warmer's pin = %v, %v; want true, nil", unpinned, err)
	}
	testbed.Eventually(t, 10*testbed.BusyMargin, "CRI reporting the unpin", func() error {
		if pinnedInCRI(t, c, mine) {
			return errors.New("still pinned in ListImages")
		}
		return nil
	})
	if !pinnedInCRI(t, c, theirs) {
		t.Error("someone else's pin is gone")
	}
	if got, err := p.Mine(ctx); err != nil || len(got) != 0 {
		t.Errorf("Mine() after unpinning = %v, %v; want none", got, err)
	}
	if unpinned, err := p.Unpin(ctx, "127.0.0.1:1/absent:v1"); err != nil || unpinned {
		t.Errorf("Unpin of an absent image = %v, %v; want false, nil", unpinned, err)
	}
}

// TestPinnerOnContainerd16: Debian's containerd 1.6 never reports pinned
// images through CRI, so pinning there would protect nothing.
func TestPinnerOnContainerd16(t *testing.T) {
	skipShort(t)
	ctd := testbed.StartContainerd(t, "node-q")
	c := connect(t, ctd.Endpoint)
	_, err := c.Pinner(testContext(t))
	if !errors.Is(err, criclient.ErrCannotPin) {
		t.Fatalf("Pinner on containerd %s: %v, want ErrCannotPin", c.RuntimeVersion().GetRuntimeVersion(), err)
	}
	t.Logf("Pinner: %v", err)
}
