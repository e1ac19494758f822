package testbed

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// WithImageFilesystemSize puts the containerd's root, where its content
// store and snapshots live, on a tmpfs of the given size: a real, small
// image filesystem that fills up, for disk pressure tests. The mount lies
// inside the containerd's directory, so cleanup (and the guard, after a
// SIGKILL) detaches it with everything else there.
func WithImageFilesystemSize(bytes int64) ContainerdOption {
	return func(c *Containerd) {
		c.t.Helper()
		root := c.Root()
		if err := os.MkdirAll(root, 0o755); err != nil {
			c.t.Fatal(err)
		}
		if err := syscall.Mount("tmpfs", root, "tmpfs", syscall.MS_NODEV|syscall.MS_NOSUID,
			fmt.Sprintf("size=%d,mode=0755", bytes)); err != nil {
			c.t.Fatalf("mounting a %d byte tmpfs on %s: %v", bytes, root, err)
		}
	}
}

// Root is the containerd's root directory, the filesystem its images use.
func (c *Containerd) Root() string { return filepath.Join(c.Dir, "root") }

// Fill writes a file of size bytes under the containerd's root, taking that
// space from its image filesystem, and returns the file's path; removing it
// frees the space.
func (c *Containerd) Fill(size int64) string {
	c.t.Helper()
	f, err := os.CreateTemp(c.Root(), "filler-")
	if err != nil {
		c.t.Fatal(err)
	}
	defer f.Close()
	// Written, not truncated: a sparse file would take no space on tmpfs.
	buf := make([]byte, 1<<20)
	for left := size; left > 0; left -= int64(len(buf)) {
		if _, err := f.Write(buf[:min(left, int64(len(buf)))]); err != nil {
			c.t.Fatalf("filling %s: %v", f.Name(), err)
		}
	}
	return f.Name()
}
