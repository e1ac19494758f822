package node

import (
	"strings"
	"testing"
	"time"

	"github.com/warmer-dev/warmer/test/testbed"
	"github.com/warmer-dev/warmer/test/testbed/build"
)

// TestTagAndDigestTogether creates, at once, an ImageWarm naming an image
// by tag and another naming it by digest, neither with pull secrets: the
// node makes one CRI pull, whose credentials (the node's) also count for
// the digest, and both ImageWarms are Ready.
func TestTagAndDigestTogether(t *testing.T) {
	reg := testbed.StartRegistry(t, testbed.RegistryOptions{})
	img := pushSmall(t, reg, "names/app", 1, 2*testbed.MB)[0]
	byDigest := reg.Host + "/names/app0@" + img.Digest
	f := startFleet(t, map[string]map[string]string{"node-1": nil}, testbed.FleetOptions{})
	f.Create(t, build.ImageWarm(ns, "by-tag", build.Images(img.Ref)))
	f.Create(t, build.ImageWarm(ns, "by-digest", build.Images(byDigest)))
	for _, name := range []string{"by-tag", "by-digest"} {
		testbed.Eventually(t, 60*time.Second, name+" Ready", func() error { return warmReady(f, name, 1) })
	}
	time.Sleep(f.AgentSettings.Resync + testbed.BusyMargin) // a verification pull would come by now
	n := f.Nodes["node-1"]
	pulls := strings.Count(n.Agent.Log(2000), `"msg":"Pulling image"`)
	if pulls != 1 {
		t.Errorf("%d CRI pulls for one image named by tag and by digest, want 1:\n%s", pulls, n.Agent.Log(60))
	}
}
