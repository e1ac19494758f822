package criclient_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warmer-dev/warmer/test/testbed"
)

// TestSnapshotsDuringUnpack pulls a gzip bomb (2 GiB of zeros in a few
// megabytes) through CRI on real containerd, 1.6 and 2.x, and measures
// its unpack through the snapshots API alone: the active snapshot of its
// layer's chain ID grows while the pull runs, another chain ID's is
// nothing; the pull, cancelled, leaves no active snapshot and gives the
// disk back (a 3 GiB tmpfs of its own). The pull engine's unpack check
// and its promise that a cancelled unpack fills nothing stand on these
// facts.
func TestSnapshotsDuringUnpack(t *testing.T) {
	skipShort(t)
	for _, v := range testbed.ContainerdVersions() {
		t.Run(v.Name, func(t *testing.T) {
			reg := testbed.StartRegistry(t, testbed.RegistryOptions{Name: "unpack"})
			img := testbed.BombImage(t, 2<<30)
			bomb := reg.Push(t, "test/bomb:v1", img)
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			chain := cf.RootFS.DiffIDs[0].String() // one layer: its chain ID is its diff ID
			// Its own filesystem, whose free space no other process on
			// the shared host moves; a tmpfs takes only what is written.
			ctd := testbed.StartContainerd(t, "node-u", append(v.Options(t), testbed.WithImageFilesystemSize(3<<30))...)
			c := connect(t, ctd.Endpoint)
			snaps, err := c.Snapshots(testContext(t))
			if err != nil {
				t.Fatalf("Snapshots on containerd %s: %v", c.RuntimeVersion().GetRuntimeVersion(), err)
			}
			if snaps.Snapshotter() != "overlayfs" {
				t.Errorf("snapshotter %q, want overlayfs", snaps.Snapshotter())
			}
			free := freeBytes(t, ctd.Root())
			ctx, cancel := context.WithCancel(testContext(t))
			done := make(chan error, 1)
			go func() { _, err := c.PullImage(ctx, bomb.Ref, nil); done <- err }()
			var seen int64
			testbed.Eventually(t, 60*time.Second, "the bomb's snapshot past 256 MiB", func() error {
				if seen, err = snaps.Unpacked(testContext(t), []string{chain}); err != nil {
					return err
				}
				if seen < 256<<20 {
					return fmt.Errorf("%d bytes unpacked", seen)
				}
				return nil
			})
			cancel()
			if other, err := snaps.Unpacked(testContext(t), []string{"sha256:" + fmt.Sprintf("%064d", 1)}); err != nil || other != 0 {
				t.Errorf("another chain's unpack: %d, %v; want 0", other, err)
			}
			if err := <-done; err == nil {
				t.Fatal("the cancelled pull succeeded")
			}
			testbed.Eventually(t, 30*time.Second, "the unpack gone and the disk back", func() error {
				n, err := snaps.Unpacked(testContext(t), []string{chain})
				if err != nil {
					return err
				}
				if n != 0 {
					return fmt.Errorf("%d bytes still unpacked", n)
				}
				if now := freeBytes(t, ctd.Root()); now+16<<20 < free {
					return fmt.Errorf("%d MiB free, %d before the pull", now>>20, free>>20)
				}
				return nil
			})
			t.Logf("seen %d MiB unpacking, then gone with the disk back", seen>>20)
		})
	}
}

// freeBytes is a filesystem's free space.
func freeBytes(t *testing.T, path string) uint64 {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Bavail * uint64(st.Bsize)
}
