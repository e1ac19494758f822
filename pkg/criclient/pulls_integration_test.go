package criclient_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/warmer-dev/warmer/test/testbed"
	"github.com/warmer-dev/warmer/test/testbed/faults"
)

// TestOthersPulls on real containerd, 1.6 and 2.x: a slowed CRI pull made
// as the kubelet makes it is listed by OthersPulls from before its end
// (its lease, started about when the call was), and no longer once it has
// ended; the client's own PullImage, in a lease of its own, is not
// listed.
func TestOthersPulls(t *testing.T) {
	skipShort(t)
	for _, v := range []struct {
		name string
		opts func(*testing.T) []testbed.ContainerdOption
	}{
		{"containerd 1.6", func(*testing.T) []testbed.ContainerdOption { return nil }},
		{"containerd 2", func(t *testing.T) []testbed.ContainerdOption {
			return []testbed.ContainerdOption{testbed.WithContainerd2(t)}
		}},
	} {
		t.Run(v.name, func(t *testing.T) {
			reg := testbed.StartRegistry(t, testbed.RegistryOptions{Name: "others"})
			slow := faults.StartSlowProxy(t, reg.Host, 4<<20)
			over := func(img testbed.Image) string { return strings.Replace(img.Ref, reg.Host, slow.Host, 1) }
			theirs := over(reg.PushRandom(t, "test/theirs:v1", testbed.ImageOptions{LayerSize: 8 * testbed.MB}))
			ours := over(reg.PushRandom(t, "test/ours:v1", testbed.ImageOptions{LayerSize: 8 * testbed.MB}))
			ctd := testbed.StartContainerd(t, "node-o", v.opts(t)...)
			c := connect(t, ctd.Endpoint)
			ctx := testContext(t)
			store, err := c.ContentStore(ctx)
			if err != nil {
				t.Fatal(err)
			}
			count := func() int {
				t.Helper()
				started, err := store.OthersPulls(ctx)
				if err != nil {
					t.Fatal(err)
				}
				return len(started)
			}
			if n := count(); n != 0 {
				t.Fatalf("OthersPulls on an idle runtime: %d pulls", n)
			}

			// Our own pull: never listed.
			done := make(chan error, 1)
			go func() { _, err := c.PullImage(ctx, ours, nil); done <- err }()
			for pulling := true; pulling; {
				select {
				case err := <-done:
					if err != nil {
						t.Fatal(err)
					}
					pulling = false
				case <-time.After(100 * time.Millisecond):
					if n := count(); n != 0 {
						t.Fatalf("the client's own pull listed as another's (%d)", n)
					}
				}
			}

			// Another client's pull, as the kubelet makes it.
			cri := ctd.ImageService(t)
			start := time.Now()
			go func() {
				_, err := cri.PullImage(context.Background(), &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: theirs}})
				done <- err
			}()
			testbed.Eventually(t, 30*time.Second, "the other pull listed", func() error {
				started, err := store.OthersPulls(ctx)
				if err != nil {
					return err
				}
				if len(started) != 1 {
					return fmt.Errorf("%d pulls", len(started))
				}
				if d := started[0].Sub(start); d < -time.Second || d > 5*time.Second {
					t.Errorf("the other pull started at %v, %v after its call", started[0], d)
				}
				return nil
			})
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if n := count(); n != 0 {
				t.Errorf("OthersPulls after the pull ended: %d pulls", n)
			}
		})
	}
}
