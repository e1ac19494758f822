package pullengine_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/warmer-dev/warmer/pkg/pullengine"
	"github.com/warmer-dev/warmer/test/testbed"
	"github.com/warmer-dev/warmer/test/testbed/faults"
)

// TestEngineOnePullHoweverNamed asks a real containerd, in one Sync, for
// one image in every way it can be named (short and full name, tag, digest,
// tag@digest), digest first, as two ImageWarms naming it differently make
// the agent do. The runtime must be asked once (one PullImage), and the
// registry, behind a logging proxy, must be asked once what the name means
// (one HEAD) and serve the manifest once (one GET). Before the engine ran
// one pull per repository at a time, the runtime was asked twice and the
// registry resolved the image twice; containerd 1.6 shares one manifest
// download between overlapping pulls, so the GETs alone do not show it.
func TestEngineOnePullHoweverNamed(t *testing.T) {
	skipShort(t)
	reg := testbed.StartRegistry(t, testbed.RegistryOptions{Name: "names"})
	proxy := faults.StartFaultProxy(t, reg.Host)
	n := startNode(t, "node-n", testbed.WithMirror("docker.io", proxy.Host))

	img := reg.PushRandom(t, "library/warmname:v1", testbed.ImageOptions{LayerSize: testbed.MB})
	tagRef, digestRef := "docker.io/library/warmname:v1", "docker.io/library/warmname@"+img.Digest
	spellings := []string{
		"warmname@" + img.Digest,
		"warmname:v1@" + img.Digest,
		"docker.io/library/warmname:v1@" + img.Digest,
		"library/warmname@" + img.Digest,
		"warmname:v1",
		"docker.io/library/warmname:v1",
	}
	svc := newCountingService(n.cri)
	e := startEngine(t, svc, testOptions(pullengine.Options{MaxParallelPulls: 4}))
	e.Sync(e.ctx, anonymous(spellings...))
	results := e.resultsByRef(t, 2)

	for _, ref := range []string{tagRef, digestRef} {
		if res := results[ref]; !res.Succeeded() || res.ImageRef != results[tagRef].ImageRef {
			t.Errorf("%s: %+v, want the pulled image", ref, res)
		}
		if !n.listed(t, ref) {
			t.Errorf("%s not listed", ref)
		}
	}
	if got := svc.pullsOf(tagRef) + svc.pullsOf(digestRef); got != 1 {
		t.Errorf("%d PullImage calls (%d by tag, %d by digest), want 1", got, svc.pullsOf(tagRef), svc.pullsOf(digestRef))
	}
	gets, heads := manifestRequests(proxy, "library/warmname")
	if gets != 1 || heads != 1 {
		t.Errorf("registry served the manifest %d times (GET) and resolved the image %d times (HEAD), want once each:\n%s",
			gets, heads, requestLog(proxy))
	}
}

// TestEngineTagAfterDigest is the case one Sync cannot cover: the tag is
// asked for only once a pull by digest has ended (two ImageWarms seen in
// two passes). A pull by digest records no tag, so the tag is pulled too,
// but the runtime finds the content present: the registry is asked what
// the tag names and serves nothing more.
func TestEngineTagAfterDigest(t *testing.T) {
	skipShort(t)
	reg := testbed.StartRegistry(t, testbed.RegistryOptions{Name: "later"})
	proxy := faults.StartFaultProxy(t, reg.Host)
	n := startNode(t, "node-l")
	img := reg.PushRandom(t, "test/later:v1", testbed.ImageOptions{LayerSize: testbed.MB})
	tagRef := proxy.Host + "/test/later:v1"
	digestRef := proxy.Host + "/test/later@" + img.Digest

	e := startEngine(t, n.cri, testOptions(pullengine.Options{MaxParallelPulls: 4}))
	e.Sync(e.ctx, anonymous(digestRef))
	if res := e.result(t); !res.Succeeded() {
		t.Fatalf("pull by digest: %s: %s", res.Class, res.Message)
	}
	before := len(proxy.Requests())
	e.Sync(e.ctx, anonymous(tagRef))
	if res := e.result(t); !res.Succeeded() || res.Ref != tagRef {
		t.Fatalf("pull by tag: %+v", res)
	}
	var after []faults.ProxyRequest
	for _, r := range proxy.Requests()[before:] {
		if r.Method != http.MethodHead && !strings.HasSuffix(r.Path, "/v2/") {
			after = append(after, r)
		}
	}
	if len(after) != 0 {
		t.Errorf("the pull by tag after the digest fetched %d more things:\n%s", len(after), requestLog(proxy))
	}
	if !n.listed(t, tagRef) {
		t.Errorf("%s not listed", tagRef)
	}
}

// anonymous asks for each image, anonymously.
func anonymous(images ...string) []pullengine.Request {
	reqs := make([]pullengine.Request, len(images))
	for i, img := range images {
		reqs[i] = pullengine.Request{Image: img}
	}
	return reqs
}

// manifestRequests counts the GET and HEAD requests for repo's manifests
// the proxy saw.
func manifestRequests(p *faults.FaultProxy, repo string) (gets, heads int) {
	for _, r := range p.Requests() {
		if !strings.HasPrefix(r.Path, "/v2/"+repo+"/manifests/") {
			continue
		}
		switch r.Method {
		case http.MethodGet:
			gets++
		case http.MethodHead:
			heads++
		}
	}
	return gets, heads
}

// requestLog is the proxy's log, one request a line.
func requestLog(p *faults.FaultProxy) string {
	var b strings.Builder
	for _, r := range p.Requests() {
		b.WriteString(r.At.Format("15:04:05.000") + " " + r.Method + " " + r.Path + "\n")
	}
	return b.String()
}
