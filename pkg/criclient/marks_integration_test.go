package criclient_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/warmer-dev/warmer/pkg/criclient"
	"github.com/warmer-dev/warmer/test/testbed"
)

// TestMarkerOnContainerd marks an image on real containerd (1.6 and 2.x)
// and reads the mark back as the agent does after a restart: by the
// digest CRI reports in the image's repo digests. The mark survives
// warmer's pin and unpin, not a pull of the image through CRI (as the
// kubelet's), after which it is made again; an unmarked image and an
// absent name stay unmarked.
func TestMarkerOnContainerd(t *testing.T) {
	skipShort(t)
	reg := testbed.StartRegistry(t, testbed.RegistryOptions{Name: "mark"})
	private := reg.PushRandom(t, "team/private:v1", testbed.ImageOptions{LayerSize: testbed.MB})
	public := reg.PushRandom(t, "team/public:v1", testbed.ImageOptions{LayerSize: testbed.MB})
	for i, v := range testbed.ContainerdVersions() {
		t.Run(v.Name, func(t *testing.T) {
			ctd := testbed.StartContainerd(t, "node-m"+string(rune('a'+i)), v.Options(t)...)
			c := connect(t, ctd.Endpoint)
			ctx := testContext(t)
			for _, img := range []testbed.Image{private, public} {
				if _, err := c.PullImage(ctx, img.Ref, nil); err != nil {
					t.Fatal(err)
				}
			}
			m, err := c.Marker(ctx)
			if err != nil {
				t.Fatalf("Marker on containerd %s: %v", c.RuntimeVersion().GetRuntimeVersion(), err)
			}
			if got, err := m.Mark(ctx, private.Ref); err != nil || !got {
				t.Fatalf("Mark(%s) = %v, %v; want true", private.Ref, got, err)
			}
			if got, err := m.Mark(ctx, "127.0.0.1:1/absent:v1"); err != nil || got {
				t.Errorf("Mark(absent) = %v, %v; want false, nil", got, err)
			}
			want := listedDigest(t, c, private.Ref)
			check := func(when string) {
				t.Helper()
				got, err := m.Marked(ctx)
				if err != nil || !slices.Equal(got, []string{want}) {
					t.Errorf("%s: Marked() = %v, %v; want only %s (the private image's repo digest)", when, got, err, want)
				}
			}
			check("after Mark")
			if p, err := c.Pinner(ctx); err == nil {
				if _, err := p.Pin(ctx, private.Ref); err != nil {
					t.Fatal(err)
				}
				if _, err := p.Unpin(ctx, private.Ref); err != nil {
					t.Fatal(err)
				}
				check("after a pin and an unpin")
			}
			// A pull through CRI rewrites the record's labels: the agent
			// marks again (plan/marks.go).
			if _, err := c.PullImage(ctx, private.Ref, nil); err != nil {
				t.Fatal(err)
			}
			if got, err := m.Marked(ctx); err != nil || len(got) != 0 {
				t.Errorf("after the image is pulled again through CRI: Marked() = %v, %v; want the mark gone (else plan/marks.go's reason to mark every pass is stale)", got, err)
			}
			if got, err := m.Mark(ctx, private.Ref); err != nil || !got {
				t.Fatalf("Mark(%s) again = %v, %v; want true", private.Ref, got, err)
			}
			check("marked again")
		})
	}
}

// listedDigest is the digest part of the repo digest CRI lists for ref.
func listedDigest(t *testing.T, c *criclient.Client, ref string) string {
	t.Helper()
	imgs, err := c.ListImages(testContext(t))
	if err != nil {
		t.Fatalf("ListImages: %v", err)
	}
	for _, img := range imgs {
		if slices.Contains(img.GetRepoTags(), ref) && len(img.GetRepoDigests()) > 0 {
			_, d, _ := strings.Cut(img.GetRepoDigests()[0], "@")
			return d
		}
	}
	t.Fatalf("%s not listed with a repo digest", ref)
	return ""
}
