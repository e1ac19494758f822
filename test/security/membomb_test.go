package security

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/test/testbed"
	"github.com/warmer-dev/warmer/test/testbed/build"
)

const (
	// bombWarms is how many ImageWarms the hog creates: enough that,
	// cached whole, they take the agent past twice its limit, few enough
	// to create in about a minute on a busy two-core machine.
	bombWarms   = 100
	bombWorkers = 8
	// bombLabels is how many labels each carries: with the annotations,
	// the images and the managed fields the API server adds for them,
	// an object of about 1.2 MB, under etcd's 1.5 MiB request limit with
	// room for the controller's status.
	bombLabels = 1200
	// bombMargin is the share of the agent's memory limit its peak may
	// take: all of it, the point past which the kernel would kill it.
	// Stripped, the agent peaked at 97 to 113 MiB here (the decoding of
	// each whole object before the strip, and what the agent keeps for
	// 100 failing images); whole, at 256 to 302 MiB.
	bombMargin = 1.0
)

// TestMemoryBomb has namespace "hog" create 100 ImageWarms, each as large
// as the API admits (100 images of 512 characters, 256 KiB of
// annotations, labels to bring the object near etcd's limit), while an
// agent built without the race detector runs on the node they all
// select; then namespace "victim" creates one small ImageWarm. The
// agent's peak resident memory (VmHWM) must stay below its shipped limit
// with a margin, the agent must never exit, and the victim's ImageWarm
// must get Ready. The agent's cache keeps of each ImageWarm only what it
// reads (controllers/agent/cache.go); the log says what the same objects
// weigh whole, for comparison (issue 32).
func TestMemoryBomb(t *testing.T) {
	const bombNode = "node-bomb"
	reg := testbed.StartRegistry(t, testbed.RegistryOptions{Name: "bomb"})
	small := reg.PushRandom(t, "victim/app:v1", testbed.ImageOptions{LayerSize: testbed.MB})
	// The agent runs in a memory cgroup with its shipped limit, as in its
	// Pod: past it, the kernel would kill it, and the agent sets its Go
	// soft limit from it (cmd/warmer memlimit.go).
	limit := memoryLimit(t, "agent_daemonset.yaml", "DaemonSet", "agent")
	cg, err := testbed.NewMemoryCgroup(t, "warmer-membomb")
	if err != nil {
		t.Fatalf("this test needs a memory cgroup (root, a memory controller): %v", err)
	}
	if err := cg.SetLimit(limit); err != nil {
		t.Fatal(err)
	}
	f := testbed.StartFleet(t, map[string]map[string]string{bombNode: nil},
		testbed.FleetOptions{PlainAgents: []string{bombNode}, PlainController: true, AgentCommand: func(_ string, argv []string) []string { return cg.Command(argv...) }})
	for _, ns := range []string{"hog", "victim"} {
		f.Create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	agent := f.Nodes[bombNode].Agent
	pid := agent.Pid()
	if log := agent.Log(200); !strings.Contains(log, "Go soft memory limit set from the container's memory limit") {
		t.Errorf("the agent in a cgroup of %d MiB set no soft memory limit:\n%s", limit>>20, agent.Log(20))
	}
	t.Logf("agent RSS before the bomb: %d MiB (limit %d MiB)", testbed.ProcStatusKiB(t, pid, "VmRSS")>>10, limit>>20)

	// Client-side rate limiting off, so that the workers reach the API
	// server as fast as it takes them.
	cfg := rest.CopyConfig(f.CP.Config)
	cfg.QPS = -1
	c, err := client.New(cfg, client.Options{Scheme: testbed.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	images := bombImages(reg.Host)
	start := time.Now()
	createBomb(t, c, images)
	t.Logf("%d ImageWarms created in hog in %v", bombWarms, time.Since(start).Round(100*time.Millisecond))

	whole, kept := bombSizes(t, c)
	t.Logf("each hog ImageWarm is %d KiB as the API server holds it, managed fields included; of it the agent's cache keeps the %d KiB of its spec's images: whole, the %d would be %d MiB of JSON alone, more once decoded",
		whole>>10, kept>>10, bombWarms, int64(bombWarms)*whole>>20)

	// The agent has taken them all in once its NodeWarm lists them.
	testbed.Eventually(t, 120*time.Second, "the agent lists every hog ImageWarm", func() error {
		return warmsListed(f, bombNode, "hog", bombWarms)
	})
	t.Logf("agent lists all %d hog ImageWarms %v after the first was created", bombWarms, time.Since(start).Round(100*time.Millisecond))

	bound := int64(float64(limit) * bombMargin)
	checkPeak := func(when string) {
		peak, now := testbed.ProcStatusKiB(t, pid, "VmHWM")<<10, testbed.ProcStatusKiB(t, pid, "VmRSS")<<10
		t.Logf("agent RSS %s: peak %d MiB, now %d MiB; bound %d MiB (%.0f%% of the %d MiB limit)",
			when, peak>>20, now>>20, bound>>20, bombMargin*100, limit>>20)
		n := f.Nodes[bombNode]
		t.Logf("agent heap %s: in use %.0f MiB, idle and not yet returned %.0f MiB, next GC at %.0f MiB", when,
			n.Metric(t, "go_memstats_heap_inuse_bytes")/(1<<20),
			(n.Metric(t, "go_memstats_heap_idle_bytes")-n.Metric(t, "go_memstats_heap_released_bytes"))/(1<<20),
			n.Metric(t, "go_memstats_next_gc_bytes")/(1<<20))
		if u, err := cg.Usage(); err == nil {
			t.Logf("agent cgroup %s: working set %d MiB (as the kubelet counts it), usage %d MiB", when, u.WorkingSet>>20, u.Usage>>20)
		}
		if peak > bound {
			t.Errorf("the agent's peak RSS %d MiB is above %d MiB, %.0f%% of its %d MiB limit", peak>>20, bound>>20, bombMargin*100, limit>>20)
		}
	}
	checkPeak("once it holds the bomb")

	f.Create(t, build.ImageWarm("victim", "small", build.Images(small.Ref)))
	testbed.Eventually(t, 90*time.Second, "the victim's image present on the node", func() error {
		return f.Nodes[bombNode].AllPresent(t, small.Ref)
	})
	t.Logf("victim's image present %v after the bomb began", time.Since(start).Round(100*time.Millisecond))
	// Ready is the controller's word, and it reads and writes every hog
	// ImageWarm whole: it takes its time.
	if out, err := f.CP.Kubectl(t, "wait", "--for=condition=Ready", "imagewarm/small", "-n", "victim", "--timeout=180s"); err != nil {
		t.Fatalf("the victim's ImageWarm did not get Ready: %v\n%s\nits status: %+v", err, out, f.ImageWarm(t, "victim", "small").Status)
	}
	t.Logf("victim/small Ready %v after the bomb began", time.Since(start).Round(100*time.Millisecond))

	if agent.Exited() || f.Nodes[bombNode].Agent != agent {
		t.Fatalf("the agent exited:\n%s", agent.Log(30))
	}
	if log := agent.Log(2000); strings.Contains(log, "panic") || strings.Contains(log, "fatal error") {
		t.Errorf("the agent's log has a panic or fatal error:\n%s", agent.Log(60))
	}
	checkPeak("at the end")
	// The controller caches every ImageWarm too, stripped of labels and
	// annotations (controllers/imagewarm stripImageWarm): whole, it held
	// 723 to 736 MiB here. It runs the plain build (PlainController): a
	// race-checked one held 240 to 256 MiB, at its limit.
	if ctrl := f.Controller.Pid(); ctrl > 0 {
		ctrlLimit := memoryLimit(t, "controller_deployment.yaml", "Deployment", "controller")
		peak := testbed.ProcStatusKiB(t, ctrl, "VmHWM") << 10
		t.Logf("controller RSS: peak %d MiB, now %d MiB, limit %d MiB",
			peak>>20, testbed.ProcStatusKiB(t, ctrl, "VmRSS")>>10, ctrlLimit>>20)
		if peak > ctrlLimit {
			t.Errorf("the controller's peak RSS %d MiB is above its %d MiB limit", peak>>20, ctrlLimit>>20)
		}
	}
}

// bombImages are 100 references of 512 characters on host, each its own
// repository (255 characters) with a 120-character tag and a sha512
// digest: the most an ImageWarm's images may hold. They are not in the
// registry, so each pull ends NotFound and is tried again later.
func bombImages(host string) []string {
	refs := make([]string, 0, warmv1.MaxImagesPerWarm)
	for i := range warmv1.MaxImagesPerWarm {
		repo := fmt.Sprintf("%s/hog/r%03d-", host, i)
		repo += strings.Repeat("x", 255-len(repo))
		tag := fmt.Sprintf("t%03d", i) + strings.Repeat("y", 116)
		refs = append(refs, repo+":"+tag+"@sha512:"+strings.Repeat(fmt.Sprintf("%x", i%16), 128))
	}
	return refs
}

// bombMeta returns the labels and annotations of a hog ImageWarm: 256 KiB
// of annotations, keys included (the API server's limit), and bombLabels
// labels with the longest keys (a 253-character prefix and a 63-character
// name) and values (63 characters) allowed.
func bombMeta() (labels, annotations map[string]string) {
	prefix := strings.Join([]string{strings.Repeat("a", 63), strings.Repeat("b", 63), strings.Repeat("c", 63), strings.Repeat("d", 61)}, ".")
	labels = make(map[string]string, bombLabels)
	for i := range bombLabels {
		name := fmt.Sprintf("l%05d", i)
		labels[prefix+"/"+name+strings.Repeat("n", 63-len(name))] = strings.Repeat("v", 63)
	}
	annotations = map[string]string{}
	const parts, total = 4, 256 << 10
	for i := range parts {
		key := fmt.Sprintf("hog.example/blob-%d", i)
		annotations[key] = strings.Repeat("z", total/parts-len(key))
	}
	return labels, annotations
}

// createBomb creates the hog's ImageWarms from bombWorkers goroutines.
func createBomb(t *testing.T, c client.Client, images []string) {
	t.Helper()
	labels, annotations := bombMeta()
	var wg sync.WaitGroup
	errs := make(chan error, bombWorkers)
	for w := range bombWorkers {
		wg.Go(func() {
			for i := w; i < bombWarms; i += bombWorkers {
				iw := build.ImageWarm("hog", fmt.Sprintf("bomb-%03d", i), build.Images(images...))
				iw.Labels, iw.Annotations = labels, annotations
				if err := c.Create(context.Background(), iw); err != nil {
					errs <- fmt.Errorf("creating hog/%s: %w", iw.Name, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// bombSizes reads one hog ImageWarm back and returns its size as JSON
// with everything the API server holds, and the size of what the agent's
// cache keeps of it (its spec's images; it resolves none).
func bombSizes(t *testing.T, c client.Client) (whole, kept int64) {
	t.Helper()
	var iw warmv1.ImageWarm
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "hog", Name: "bomb-000"}, &iw); err != nil {
		t.Fatal(err)
	}
	all, err := json.Marshal(&iw)
	if err != nil {
		t.Fatal(err)
	}
	images, err := json.Marshal(iw.Spec.Images)
	if err != nil {
		t.Fatal(err)
	}
	return int64(len(all)), int64(len(images))
}

// warmsListed says whether the node's NodeWarm lists want ImageWarms of
// namespace ns.
func warmsListed(f *testbed.Fleet, node, ns string, want int) error {
	nw, err := f.NodeWarm(node)
	if err != nil {
		return err
	}
	n := 0
	for _, w := range nw.Status.Warms {
		if w.Namespace == ns {
			n++
		}
	}
	if n != want {
		return fmt.Errorf("%d of %s's ImageWarms listed, want %d", n, ns, want)
	}
	return nil
}

// memoryLimit reads a container's memory limit from the shipped workload
// of kind in config/daemonset's file.
func memoryLimit(t *testing.T, file, kind, container string) int64 {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(testbed.RepoRoot(t), "config", "daemonset", file))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(raw), "\n---") {
		var w struct {
			Kind string `json:"kind"`
			Spec struct {
				Template corev1.PodTemplateSpec `json:"template"`
			} `json:"spec"`
		}
		if yaml.Unmarshal([]byte(doc), &w) != nil || w.Kind != kind {
			continue
		}
		for _, c := range w.Spec.Template.Spec.Containers {
			if l := c.Resources.Limits[corev1.ResourceMemory]; c.Name == container && !l.IsZero() {
				return l.Value()
			}
		}
	}
	t.Fatalf("config/daemonset/%s has no memory limit for the %s container", file, container)
	return 0
}
