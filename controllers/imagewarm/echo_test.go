package imagewarm

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/test/testbed"
)

// TestDeletedNodeWarmComesBack deletes a warm node's NodeWarm by hand and
// recreates it at once with its full report, as the agent does, round
// after round: the controller's NotReporting write and the recreated
// report meet in the moment before the write reaches the manager's cache.
// The ImageWarm must be Ready again within a few seconds every round,
// never held at NotReporting for want of a later event.
//
// On loopback, with an idle API server, the watch brings the write back
// within a millisecond and the race is rarely met; on a loaded control
// plane it was seen to last over a minute. So the controller reads its
// ImageWarms through laggingCache, which serves each ImageWarm as it was
// before the controller's own status write for a while after it: the one
// fault here that the real parts do not make on demand (a slow watch).
func TestDeletedNodeWarmComesBack(t *testing.T) {
	cp := testbed.StartControlPlane(t)
	startReconcilerReading(t, cp, &Reconciler{MinWriteInterval: testWriteInterval}, func(c client.Client) client.Client {
		return &laggingCache{Client: c, lag: 2 * time.Second, before: map[client.ObjectKey]lagged{}}
	})
	e := &iwEnv{t: t, cp: cp, key: client.ObjectKey{Namespace: "default", Name: "web"}}
	nodes := []string{"dn-1", "dn-2", "dn-3"}
	for _, n := range nodes {
		cp.CreateNode(t, n, map[string]string{"zone": "a"})
	}
	iw := &warmv1.ImageWarm{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.key.Namespace, Name: e.key.Name},
		Spec:       warmv1.ImageWarmSpec{Images: []warmv1.ImageReference{"nginx:1.27"}, NodeSelector: iwZone("a")},
	}
	if err := cp.Client.Create(t.Context(), iw); err != nil {
		t.Fatal(err)
	}
	warm := iwWithDigest(iwImg("nginx:1.27", warmv1.ImagePresent), iwDigestA)
	for _, n := range nodes {
		e.putReport(n, iwWebAt(1), warm)
	}
	ready := func(st warmv1.ImageWarmStatus) error {
		return iwAll(iwCounts(st, warmv1.NodeCounts{Matching: 3, Ready: 3}),
			iwCond(st, warmv1.ConditionReady, metav1.ConditionTrue, warmv1.ReasonAllNodesWarm))
	}
	e.waitFor(t, ready)

	for round := range 3 {
		// Past the write interval, so the NotReporting write goes out at
		// once rather than waiting its turn.
		time.Sleep(testWriteInterval + 200*time.Millisecond)
		nw := &warmv1.NodeWarm{ObjectMeta: metav1.ObjectMeta{Name: "dn-2"}}
		if err := cp.Client.Delete(context.Background(), nw); err != nil {
			t.Fatal(err)
		}
		// The recreate comes once the controller has written NotReporting.
		e.waitFor(t, func(st warmv1.ImageWarmStatus) error {
			if st.Nodes.NotReporting != 1 {
				return fmt.Errorf("nodes %+v: want one not reporting", st.Nodes)
			}
			return nil
		})
		e.putReport("dn-2", iwWebAt(1), warm)
		deadline := time.Now().Add(3*testWriteInterval + 2*time.Second)
		for {
			got := e.get().Status
			err := ready(got)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: the ImageWarm is not Ready again: %v; %s", round, err, condSummary(got))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// condSummary is the Ready condition's reason and message, for a failure.
func condSummary(st warmv1.ImageWarmStatus) string {
	for _, c := range st.Conditions {
		if c.Type == warmv1.ConditionReady {
			return fmt.Sprintf("Ready=%s %s: %s", c.Status, c.Reason, c.Message)
		}
	}
	return "no Ready condition"
}

// laggingCache serves each ImageWarm, for lag after the controller's own
// status write of it, as it was before that write, as a cache whose
// watch is slow would.
type laggingCache struct {
	client.Client
	lag    time.Duration
	mu     sync.Mutex
	before map[client.ObjectKey]lagged
}

// lagged is an ImageWarm as it was before a status write, served until.
type lagged struct {
	iw    *warmv1.ImageWarm
	until time.Time
}

func (c *laggingCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if iw, ok := obj.(*warmv1.ImageWarm); ok {
		c.mu.Lock()
		l, found := c.before[key]
		c.mu.Unlock()
		if found && time.Now().Before(l.until) {
			l.iw.DeepCopyInto(iw)
			return nil
		}
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

func (c *laggingCache) Status() client.SubResourceWriter {
	return &laggingStatus{SubResourceWriter: c.Client.Status(), c: c}
}

// laggingStatus notes the ImageWarm as the cache holds it before each
// status update.
type laggingStatus struct {
	client.SubResourceWriter
	c *laggingCache
}

func (s *laggingStatus) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	iw, ok := obj.(*warmv1.ImageWarm)
	if !ok {
		return s.SubResourceWriter.Update(ctx, obj, opts...)
	}
	key := client.ObjectKeyFromObject(iw)
	old := &warmv1.ImageWarm{}
	if err := s.c.Get(ctx, key, old); err != nil {
		return err
	}
	if err := s.SubResourceWriter.Update(ctx, obj, opts...); err != nil {
		return err
	}
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	s.c.before[key] = lagged{iw: old, until: time.Now().Add(s.c.lag)}
	return nil
}
