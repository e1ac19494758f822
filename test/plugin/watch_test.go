package plugin

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/test/testbed"
)

// TestWatchPlain follows shop/web with status --watch as warmer-viewer,
// its output not a terminal: a line per change while the status moves,
// then, once the ImageWarm turns Ready, the whole status and exit 0.
func TestWatchPlain(t *testing.T) {
	cp := testbed.StartControlPlane(t)
	grantViewer(t, cp, viewer)
	createFixture(t, cp)
	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	out := newPrinted()
	go func() {
		err := runTo(cp, viewer, out, "status", "web", "-n", shop, "--watch", "--timeout=60s")
		done <- result{out.String(), err}
	}()
	// The first move only once the watch has printed the status as it
	// was: on a busy machine the command takes seconds to start, and a
	// move before that would never show the first state.
	select {
	case <-out.first:
	case r := <-done:
		t.Fatalf("status --watch ended before printing: %v\n%s", r.err, r.out)
	case <-time.After(60 * time.Second):
		t.Fatal("status --watch printed nothing in a minute")
	}
	ctx := context.Background()
	key := client.ObjectKey{Namespace: shop, Name: "web"}
	// Two moves a few seconds apart (the plain view writes at most once a
	// second), then Ready.
	for i, st := range []func(*warmv1.ImageWarmStatus){
		func(s *warmv1.ImageWarmStatus) { s.Nodes.Ready, s.Nodes.Pulling = 4, 2 },
		func(s *warmv1.ImageWarmStatus) {
			s.Nodes = warmv1.NodeCounts{Matching: 8, Ready: 8}
			s.ReadyImages = 2
			meta.SetStatusCondition(&s.Conditions, cond(warmv1.ConditionReady, metav1.ConditionTrue, warmv1.ReasonAllNodesWarm, "every matching node has every image"))
		},
	} {
		time.Sleep(3 * time.Second)
		iw := &warmv1.ImageWarm{}
		if err := cp.Client.Get(ctx, key, iw); err != nil {
			t.Fatal(err)
		}
		st(&iw.Status)
		if err := cp.Client.Status().Update(ctx, iw); err != nil {
			t.Fatalf("status update %d: %v", i, err)
		}
	}
	var r result
	select {
	case r = <-done:
	case <-time.After(90 * time.Second):
		t.Fatal("status --watch did not end at Ready")
	}
	t.Logf("status --watch printed:\n%s", r.out)
	if r.err != nil {
		t.Fatalf("status --watch ended with %v, want exit 0 at Ready", r.err)
	}
	for _, want := range []string{"1 of 8 nodes warm", "4 of 8 nodes warm", "ImageWarm shop/web: Ready", "8 of 8 nodes warm"} {
		if !strings.Contains(r.out, want) {
			t.Errorf("no %q in what it printed", want)
		}
	}
	if strings.Contains(r.out, "NotFound") {
		t.Error("a Ready ImageWarm whose status counts no failed node shows a failure its last NodeWarms still held")
	}
	if strings.ContainsRune(r.out, '\x1b') {
		t.Error("escape sequences in output that is not a terminal's")
	}
}

// printed is an output that says when it was first written to.
type printed struct {
	mu    sync.Mutex
	buf   strings.Builder
	first chan struct{}
}

func newPrinted() *printed { return &printed{first: make(chan struct{})} }

func (p *printed) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.buf.Len() == 0 && len(b) > 0 {
		close(p.first)
	}
	return p.buf.Write(b)
}

func (p *printed) String() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.buf.String()
}
