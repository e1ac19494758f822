package registry

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/warmer-dev/warmer/test/testbed"
	"github.com/warmer-dev/warmer/test/testbed/faults"
)

// discardLayer is the size of each layer of the discard test's image: far
// above any manifest or config, so a blob this large in the content store
// is a layer.
const discardLayer = 4 * testbed.MB

// TestDiscardUnpackedLayers runs the agent on containerds set to discard
// an image's compressed layers once unpacked (discard_unpacked_layers, as
// some clouds ship), 1.6 and 2: the image is warmed and reported present,
// its layers are gone from the content store (so the setting took), and
// an agent started again finds it present without fetching a layer again,
// though the content store it reads progress from no longer holds them.
func TestDiscardUnpackedLayers(t *testing.T) {
	versions := testbed.ContainerdVersions()
	nodes := map[string]map[string]string{}
	byNode := map[string]testbed.ContainerdVersion{}
	names := []string{"discard-16", "discard-2"}
	for i, v := range versions {
		nodes[names[i]], byNode[names[i]] = nil, v
	}
	f := testbed.StartFleet(t, nodes, testbed.FleetOptions{
		Agent: &settings,
		Containerd: func(node string) []testbed.ContainerdOption {
			return append(byNode[node].Options(t), testbed.WithDiscardUnpackedLayers())
		},
	})
	reg := testbed.StartRegistry(t, testbed.RegistryOptions{Name: "discard"})
	img := reg.PushRandom(t, "discard/app:v1", testbed.ImageOptions{LayerSize: discardLayer, Layers: 2})
	for i, v := range versions {
		node := names[i]
		t.Run(v.Name, func(t *testing.T) {
			p := faults.StartFaultProxy(t, reg.Host)
			ref := via(img, reg, p)
			warmOn(t, f, "discard-"+node, node, 0, ref)
			waitPresent(t, f, node, ref, 90*time.Second)
			n := f.Nodes[node]
			// The layers go at containerd's next garbage collection.
			testbed.Eventually(t, 60*time.Second, "the layers discarded", func() error {
				if big := contentLayers(t, n.Containerd.Root()); len(big) != 0 {
					return fmt.Errorf("layers left in the content store with discard_unpacked_layers on: %v", big)
				}
				return nil
			})
			fetched := layerFetches(p.Requests())
			if fetched < 2 {
				t.Fatalf("%d layer fetches through the proxy, want the image's 2", fetched)
			}
			n.Agent.Stop()
			n.RestartAgent(t)
			// A few passes of the new agent: the image stays present,
			// and no layer is fetched again.
			time.Sleep(3 * settings.Resync)
			waitPresent(t, f, node, ref, 30*time.Second)
			if again := layerFetches(p.Requests()); again != fetched {
				t.Errorf("%d layer fetches after the agent started again, %d before: the image was pulled again", again, fetched)
			}
		})
	}
}

// contentLayers lists the blobs of the content store under root as large
// as a layer of the test's image.
func contentLayers(t *testing.T, root string) []string {
	t.Helper()
	var big []string
	dir := filepath.Join(root, "io.containerd.content.v1.content", "blobs")
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if info, err := d.Info(); err == nil && info.Size() >= discardLayer {
			big = append(big, filepath.Base(path))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("reading the content store: %v", err)
	}
	return big
}

// layerFetches counts the blob GETs a proxy saw: layers and configs.
func layerFetches(reqs []faults.ProxyRequest) int {
	n := 0
	for _, r := range reqs {
		if r.Method == "GET" && strings.Contains(r.Path, "/blobs/") {
			n++
		}
	}
	return n
}
