package testbed

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// WithUnpackHold stops this containerd's unpack of each gzip layer after
// its first MiB for as long as the file hold exists, and lets it go on
// once the file is removed: a stuck unpack (a disk that stopped taking
// writes, a decompressor that hangs) on demand, while containerd, its
// content store and its snapshot service all still answer, as they do
// when an unpack is stuck on a node.
//
// Both containerd 1.6 and 2.x decompress gzip layers with unpigz when
// their PATH has one (unless CONTAINERD_DISABLE_PIGZ is set): the option
// puts a script of that name first on the PATH, which decompresses with
// gzip and holds the decompressed stream. The layers must be gzip (as
// RandomImage's are; BigImage's are not compressed and never held).
func WithUnpackHold(hold string) ContainerdOption {
	return func(c *Containerd) { c.unpackHold = hold }
}

// unpigzScript is the stand-in for unpigz: containerd runs it as
// "unpigz -d -c" with the layer on stdin. dd's fullblock reads exactly
// the first MiB, so no byte is lost while held.
const unpigzScript = `#!/bin/sh
# The test bed's unpigz (testbed.WithUnpackHold).
gzip -dc | {
	dd bs=1048576 count=1 iflag=fullblock 2>/dev/null
	while [ -e %q ]; do sleep 0.1; done
	exec cat
}
`

// unpackHoldPath writes the unpigz stand-in into the instance's own bin
// folder and returns the PATH that puts it first, given the PATH
// containerd would otherwise have; or path unchanged without a hold.
func (c *Containerd) unpackHoldPath(path string) (string, error) {
	if c.unpackHold == "" {
		return path, nil
	}
	bin := filepath.Join(c.Dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(bin, "unpigz"), fmt.Appendf(nil, unpigzScript, c.unpackHold), 0o755); err != nil {
		return "", err
	}
	return bin + ":" + path, nil
}

// pathOf is the value of PATH in env, or the test binary's own when env
// does not set it.
func pathOf(env []string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], "PATH="); ok {
			return v
		}
	}
	return os.Getenv("PATH")
}
