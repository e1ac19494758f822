package node

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/test/testbed"
	"github.com/warmer-dev/warmer/test/testbed/build"
)

const (
	churnWarms   = 200
	churnWorkers = 8
	// maxAgentRSS bounds an agent's resident memory through the churn. An
	// idle agent sits near 50 MiB; the state for 200 ImageWarms is small,
	// so growth beyond this is a leak, not load.
	maxAgentRSS = 100 << 20
)

// churnSpec is one version of an ImageWarm's spec: a selector (nil: every
// node) and images by index into the test's images.
type churnSpec struct {
	pool   string
	images []int
}

// TestChurn200ImageWarms creates, edits and deletes 200 ImageWarms from
// several goroutines at once while two agents act on them, then checks
// that each node wants exactly what the surviving ImageWarms ask of it and
// that the (plain-built) agent's memory stayed bounded.
func TestChurn200ImageWarms(t *testing.T) {
	reg := testbed.StartRegistry(t, testbed.RegistryOptions{})
	imgs := pushSmall(t, reg, "churn/app", 6, testbed.MB)
	pools := map[string]string{"node-1": "a", "node-2": "b"}
	// node-1's agent is the plain build, whose memory is measured; node-2's
	// is race-checked through the same churn (under go test -race the race
	// detector multiplies its memory).
	const measured = "node-1"
	f := startFleet(t, map[string]map[string]string{"node-1": {"pool": "a"}, "node-2": {"pool": "b"}},
		testbed.FleetOptions{PlainAgents: []string{measured}})
	t.Logf("agent %s RSS before the churn: %d MiB", measured, rss(t, f.Nodes[measured].Agent.Pid())>>20)

	// Client-side rate limiting off: the churn should reach the API server
	// as fast as the goroutines make it.
	cfg := rest.CopyConfig(f.CP.Config)
	cfg.QPS = -1
	c, err := client.New(cfg, client.Options{Scheme: testbed.Scheme()})
	if err != nil {
		t.Fatal(err)
	}

	stopSampling := sampleRSS(f)
	start := time.Now()
	final := churn(t, c, imgs)
	t.Logf("%d ImageWarms created, edited twice and a third deleted by %d goroutines in %v",
		churnWarms, churnWorkers, time.Since(start).Round(100*time.Millisecond))

	for name, pool := range pools {
		want, warms := desiredOn(pool, final, imgs)
		testbed.Eventually(t, 120*time.Second, "NodeWarm of "+name+" settles on the surviving ImageWarms", func() error {
			if err := listsExactly(f, name, keys(t, want), true); err != nil {
				return err
			}
			return warmsExactly(f, name, warms...)
		})
		t.Logf("%s settled %v after the churn began: %d images for %d ImageWarms", name,
			time.Since(start).Round(100*time.Millisecond), len(want), len(warms))
		if err := f.Nodes[name].AllPresent(t, want...); err != nil {
			t.Error(err)
		}
	}
	testbed.Eventually(t, 120*time.Second, "every surviving ImageWarm Ready", func() error {
		for name, s := range final {
			nodes := int32(1)
			if s.pool == "" {
				nodes = 2
			}
			if err := warmReady(f, name, nodes); err != nil {
				return err
			}
		}
		return nil
	})
	t.Logf("all %d surviving ImageWarms Ready %v after the churn began", len(final), time.Since(start).Round(100*time.Millisecond))
	peak, now := stopSampling()[measured], rss(t, f.Nodes[measured].Agent.Pid())
	t.Logf("agent %s RSS: peak %d MiB during the churn, %d MiB after (bound %d MiB)", measured, peak>>20, now>>20, maxAgentRSS>>20)
	if peak > maxAgentRSS || now > maxAgentRSS {
		t.Errorf("agent %s used %d MiB, more than %d MiB", measured, max(peak, now)>>20, maxAgentRSS>>20)
	}
}

// churn runs the workers and returns the final spec of every ImageWarm that
// survives.
func churn(t *testing.T, c client.Client, imgs []testbed.Image) map[string]churnSpec {
	t.Helper()
	var (
		mu    sync.Mutex
		final = map[string]churnSpec{}
		wg    sync.WaitGroup
		errs  = make(chan error, churnWorkers)
	)
	for w := range churnWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 42))
			for i := w; i < churnWarms; i += churnWorkers {
				name := fmt.Sprintf("churn-%03d", i)
				survives := i%3 != 0
				last := survivorSpec(rng)
				if !survives {
					last = anySpec(rng)
				}
				if err := lifecycle(c, name, []churnSpec{anySpec(rng), anySpec(rng), last}, survives, imgs); err != nil {
					errs <- fmt.Errorf("%s: %w", name, err)
					return
				}
				if survives {
					mu.Lock()
					final[name] = last
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return final
}

// lifecycle creates an ImageWarm with the first spec, updates it to each
// following one, and deletes it unless it survives.
func lifecycle(c client.Client, name string, specs []churnSpec, survives bool, imgs []testbed.Image) error {
	ctx := context.Background()
	iw := warm(name, specs[0], imgs)
	if err := c.Create(ctx, iw); err != nil {
		return err
	}
	for _, s := range specs[1:] {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			var cur warmv1.ImageWarm
			if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &cur); err != nil {
				return err
			}
			cur.Spec = warm(name, s, imgs).Spec
			return c.Update(ctx, &cur)
		})
		if err != nil {
			return err
		}
	}
	if survives {
		return nil
	}
	if err := c.Delete(ctx, iw); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}

func warm(name string, s churnSpec, imgs []testbed.Image) *warmv1.ImageWarm {
	var sel map[string]warmv1.LabelValue
	if s.pool != "" {
		sel = map[string]warmv1.LabelValue{"pool": warmv1.LabelValue(s.pool)}
	}
	var refs []string
	for _, i := range s.images {
		refs = append(refs, imgs[i].Ref)
	}
	return build.ImageWarm(ns, name, build.Images(refs...), build.Selector(sel))
}

// anySpec may select anything and ask for any image, including the sixth,
// which no surviving ImageWarm wants.
func anySpec(rng *rand.Rand) churnSpec {
	return churnSpec{pool: []string{"", "a", "b"}[rng.IntN(3)], images: pick(rng, 6)}
}

// survivorSpec keeps each selector to its own images, so that the final
// sets differ per node: every node gets 0-1, pool a 0-4, pool b 0-2.
func survivorSpec(rng *rand.Rand) churnSpec {
	switch rng.IntN(3) {
	case 0:
		return churnSpec{images: pick(rng, 2)}
	case 1:
		return churnSpec{pool: "a", images: pick(rng, 5)}
	default:
		return churnSpec{pool: "b", images: pick(rng, 3)}
	}
}

// pick returns a non-empty random subset of 0..n-1, sorted.
func pick(rng *rand.Rand, n int) []int {
	var out []int
	for i := range n {
		if rng.IntN(2) == 0 {
			out = append(out, i)
		}
	}
	if len(out) == 0 {
		out = []int{rng.IntN(n)}
	}
	return out
}

// desiredOn is what a node in pool wants: the images and names of the
// surviving ImageWarms that select it.
func desiredOn(pool string, final map[string]churnSpec, imgs []testbed.Image) (refs, warms []string) {
	set := map[int]bool{}
	for name, s := range final {
		if s.pool == "" || s.pool == pool {
			warms = append(warms, name)
			for _, i := range s.images {
				set[i] = true
			}
		}
	}
	for _, i := range slices.Sorted(maps.Keys(set)) {
		refs = append(refs, imgs[i].Ref)
	}
	return refs, warms
}

// sampleRSS records each agent's peak RSS every 100 ms until the returned
// function is called, which returns the peaks.
func sampleRSS(f *testbed.Fleet) func() map[string]int64 {
	peaks := map[string]int64{}
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			for name, n := range f.Nodes {
				if v, err := rssOf(n.Agent.Pid()); err == nil {
					peaks[name] = max(peaks[name], v)
				}
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() map[string]int64 {
		close(done)
		<-stopped
		return peaks
	}
}
