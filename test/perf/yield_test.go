package perf

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/warmer-dev/warmer/test/testbed"
	"github.com/warmer-dev/warmer/test/testbed/build"
	"github.com/warmer-dev/warmer/test/testbed/faults"
)

// linkRate is the node's link in BenchmarkKubeletBesideWarm: every pull
// goes through one proxy at this rate, as a node's pulls share its
// network link; on loopback nothing else would be shared but the CPU.
const linkRate = 32 << 20

// BenchmarkKubeletBesideWarm times the pull a starting Pod needs, made as
// the kubelet makes it (CRI PullImage on the node's containerd), while the
// agent warms ten other images over the same link, in each of the
// agent's --yield-to-kubelet modes (off, wait, and the default, pause),
// against the same pull on an idle node.
// It reports each mode's time as a ratio to idle (pod-x-idle); the target
// is 1.2 with yielding on. -benchtime Nx gives N rounds of each mode.
func BenchmarkKubeletBesideWarm(b *testing.B) {
	cp := testbed.StartControlPlane(b)
	bin := testbed.BuildPlainWarmer(b)
	const node = "yield-node"
	ctd := testbed.StartContainerd(b, node)
	cri := ctd.ImageService(b)
	cp.CreateNode(b, node, nil)
	reg := testbed.StartRegistry(b, testbed.RegistryOptions{Name: "yield"})
	link := faults.StartLinkProxy(b, reg.Host, linkRate)
	over := func(img testbed.Image) string { return strings.Replace(img.Ref, reg.Host, link.Host, 1) }
	pod := over(reg.PushRandom(b, "perf/pod:v1", testbed.ImageOptions{LayerSize: 96 * testbed.MB}))
	var warm []string
	for i := range 10 {
		warm = append(warm, over(reg.PushRandom(b, fmt.Sprintf("perf/warm%d:v1", i), testbed.ImageOptions{LayerSize: 24 * testbed.MB})))
	}
	podPull := func() time.Duration {
		start := time.Now()
		if _, err := cri.PullImage(context.Background(), &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: pod}}); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	runBesideWarm(b, &besideWarm{cp: cp, bin: bin, node: node, ctd: ctd, pod: pod, warm: warm, podPull: podPull,
		link: link, bytes: 96*testbed.MB + 10*24*testbed.MB})
}

// besideWarm is one node on which BenchmarkKubeletBesideWarm's rounds
// run: the pod's image and the ten warmed through one link, and how the
// pod's pull is made and timed.
type besideWarm struct {
	cp        *testbed.ControlPlane
	bin, node string
	ctd       *testbed.Containerd
	pod       string
	warm      []string
	podPull   func() time.Duration
	// link is the shared link; bytes what the pod's image and the ten
	// weigh on it (their layers' payload: the images' own bytes).
	link  *faults.SlowProxy
	bytes int64
	// agentFlags are added to every agent's flags.
	agentFlags []string
	// fresh, if set, gives new images (the pod's and the ten) for each
	// mode: on the real node's containerd 2.x an image removed leaves
	// layers behind that the next pull of it finds, so each pull gets
	// images never pulled before.
	fresh func() (pod string, warm []string)
}

// runBesideWarm runs each mode once per round: idle (no agent), then an
// agent in each --yield-to-kubelet mode ("default": the flag unset, i.e.
// pause) warming the ten images, with the pod's pull made once three warm
// pulls are under way. It reports each mode's median pod pull and its
// ratio to idle, and what the warm lost: the time until all ten were in,
// and the bytes the link carried beyond the images' own (fetched again).
func runBesideWarm(b *testing.B, s *besideWarm) {
	cri := s.ctd.ImageService(b)
	remove := func(refs ...string) {
		for _, r := range refs {
			if _, err := cri.RemoveImage(context.Background(), &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: r}}); err != nil {
				b.Fatalf("removing %s: %v", r, err)
			}
		}
	}
	// "default" runs the agent without --yield-to-kubelet: pause.
	modes := []string{"idle", "off", "wait", "default"}
	times, warms := map[string][]time.Duration{}, map[string][]time.Duration{}
	extras, pauses := map[string][]float64{}, map[string][]float64{}
	for b.Loop() {
		for _, mode := range modes {
			if s.fresh != nil {
				s.pod, s.warm = s.fresh()
			}
			remove(append([]string{s.pod}, s.warm...)...)
			sent := s.link.Sent()
			if mode == "idle" {
				times[mode] = append(times[mode], s.podPull())
				continue
			}
			pod, warm, paused := s.pullBesideAgent(b, mode)
			times[mode] = append(times[mode], pod)
			warms[mode] = append(warms[mode], warm)
			pauses[mode] = append(pauses[mode], paused)
			extras[mode] = append(extras[mode], float64(s.link.Sent()-sent-s.bytes)/1e6)
		}
	}
	idle := median(times["idle"])
	for _, mode := range modes {
		m := median(times[mode])
		b.ReportMetric(m.Seconds(), "s-pod-"+mode)
		b.ReportMetric(m.Seconds()/idle.Seconds(), "pod-x-idle-"+mode)
		b.Logf("%-8s pod pull %v (rounds %v), %.2fx idle", mode, m.Round(10*time.Millisecond), times[mode], m.Seconds()/idle.Seconds())
		if mode == "idle" {
			continue
		}
		w, x := median(warms[mode]), median(extras[mode])
		b.ReportMetric(w.Seconds(), "s-warm-"+mode)
		b.ReportMetric(x, "MB-refetched-"+mode)
		b.ReportMetric(median(pauses[mode]), "pauses-"+mode)
		b.Logf("%-8s warm of ten %v (rounds %v), link carried %.2f MB beyond the images (rounds %.2f), warm pulls paused %v", mode,
			w.Round(10*time.Millisecond), warms[mode], x, extras[mode], pauses[mode])
	}
}

// pullBesideAgent starts an agent in mode, warms the ten images, times the
// pod's pull once three warm pulls are under way, and waits for the ten
// to be in. It returns the pod's pull time, the warm's from the
// ImageWarm's creation, and how many warm pulls the agent paused.
func (s *besideWarm) pullBesideAgent(b *testing.B, mode string) (pod, warm time.Duration, paused float64) {
	flags := s.agentFlags
	if mode != "default" {
		flags = append([]string{"--yield-to-kubelet=" + mode}, flags...)
	}
	agent, metrics := startAgent(b, s.cp, s.bin, s.node, s.ctd, flags...)
	defer agent.Stop()
	iw := build.ImageWarm("default", "beside", build.Images(s.warm...))
	start := time.Now()
	if err := s.cp.Client.Create(context.Background(), iw); err != nil {
		b.Fatal(err)
	}
	eventually(b, time.Minute, "three warm pulls under way", func() error {
		m, err := tryScrape(metrics)
		if err != nil {
			return err
		}
		if n := sumSamples(m, "warmer_image_pulls_in_flight"); n < 3 {
			return fmt.Errorf("%v in flight", n)
		}
		return nil
	})
	time.Sleep(time.Second)
	pod = s.podPull()
	eventually(b, 3*time.Minute, "the ten warmed", func() error {
		m, err := tryScrape(metrics)
		if err != nil {
			return err
		}
		if n := sumSamples(m, "warmer_image_pulls_total", `result="success"`); n < float64(len(s.warm)) {
			return fmt.Errorf("%v pulled", n)
		}
		return nil
	})
	warm = time.Since(start)
	paused = sumSamples(scrape(b, metrics), "warmer_image_pull_pauses_total")
	if err := s.cp.Client.Delete(context.Background(), iw); err != nil {
		b.Fatal(err)
	}
	return pod, warm, paused
}
