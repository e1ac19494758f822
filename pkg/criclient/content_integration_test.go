package criclient_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/warmer-dev/warmer/pkg/criclient"
	"github.com/warmer-dev/warmer/test/testbed"
	"github.com/warmer-dev/warmer/test/testbed/faults"
)

// TestContentStoreDuringPull watches a slowed CRI pull on real containerd,
// 1.6 and 2.x, through the content API alone: the layer shows as an
// ingest whose bytes grow, the image's manifest is found by its registry
// and repository while the layer is still coming, names that layer, and
// once the pull ends the store holds the layer in full. The pull engine's
// progress tracking stands on these facts.
func TestContentStoreDuringPull(t *testing.T) {
	skipShort(t)
	for _, v := range testbed.ContainerdVersions() {
		t.Run(v.Name, func(t *testing.T) {
			reg := testbed.StartRegistry(t, testbed.RegistryOptions{Name: "content"})
			slow := faults.StartSlowProxy(t, reg.Host, 2<<20)
			img := reg.PushRandom(t, "test/big:v1", testbed.ImageOptions{LayerSize: 8 * testbed.MB})
			ref := strings.Replace(img.Ref, reg.Host, slow.Host, 1)
			ctd := testbed.StartContainerd(t, "node-c", v.Options(t)...)
			c := connect(t, ctd.Endpoint)
			store, err := c.ContentStore(testContext(t))
			if err != nil {
				t.Fatalf("ContentStore on containerd %s: %v", c.RuntimeVersion().GetRuntimeVersion(), err)
			}
			watchPull(t, c, store, ref, slow.Host, img.Size)
		})
	}
}

// watchPull pulls ref and checks what the content store shows meanwhile
// and after.
func watchPull(t *testing.T, c *criclient.Client, store *criclient.ContentStore, ref, host string, size int64) {
	ctx := testContext(t)
	started := time.Now()
	done := make(chan error, 1)
	go func() { _, err := c.PullImage(ctx, ref, nil); done <- err }()

	var layer criclient.Ingest
	testbed.Eventually(t, 60*time.Second, "the layer ingest half written", func() error {
		ing, err := store.Ingests(ctx)
		if err != nil {
			return err
		}
		for _, i := range ing {
			if i.Total == size && i.Offset > 0 && i.Offset < i.Total && strings.HasPrefix(i.Digest, "sha256:") {
				layer = i
				return nil
			}
		}
		return fmt.Errorf("ingests %+v", ing)
	})
	layers := manifestLayers(t, store, host, "test/big", started)
	if len(layers) != 1 || layers[0] != layer.Digest {
		t.Errorf("manifest names layers %v, want the ingest's %s", layers, layer.Digest)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	b, ok, err := store.Blob(ctx, layer.Digest)
	if err != nil || !ok || b.Size != size {
		t.Errorf("after the pull, Blob(layer) = %+v, %v, %v; want %d bytes held", b, ok, err, size)
	}
	t.Logf("layer created %v, %v after the pull started", b.CreatedAt, b.CreatedAt.Sub(started))
	if b, ok, err := store.Blob(ctx, "sha256:"+strings.Repeat("0", 64)); err != nil || ok {
		t.Errorf("Blob(absent) = %+v, %v, %v; want not held, no error", b, ok, err)
	}
}

// manifestLayers finds the manifest of repo fetched from host since
// started, while its layer is still being written, and reads the layers
// it names.
func manifestLayers(t *testing.T, store *criclient.ContentStore, host, repo string, started time.Time) []string {
	t.Helper()
	ctx := testContext(t)
	var found criclient.Blob
	testbed.Eventually(t, 10*time.Second, "the manifest labelled with its source", func() error {
		ms, err := store.Manifests(ctx, host, repo)
		if err != nil {
			return err
		}
		for _, m := range ms {
			if !m.UpdatedAt.Before(started) {
				found = m
				return nil
			}
		}
		return fmt.Errorf("manifests of %s/%s: %+v", host, repo, ms)
	})
	if ms, err := store.Manifests(ctx, host, "test/other"); err != nil || len(ms) != 0 {
		t.Errorf("Manifests of another repository = %+v, %v; want none", ms, err)
	}
	raw, err := store.Read(ctx, found.Digest, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Layers []struct{ Digest string } `json:"layers"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range m.Layers {
		out = append(out, l.Digest)
	}
	if _, err := store.Read(ctx, found.Digest, 10); err == nil {
		t.Error("Read with a limit below the manifest's size succeeded")
	}
	return out
}
