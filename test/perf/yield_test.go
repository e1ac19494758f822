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
// agent's --yield-to-kubelet modes, against the same pull on an idle node.
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
	remove := func(refs ...string) {
		for _, r := range refs {
			if _, err := cri.RemoveImage(context.Background(), &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: r}}); err != nil {
				b.Fatalf("removing %s: %v", r, err)
			}
		}
	}
	podPull := func() time.Duration {
		start := time.Now()
		if _, err := cri.PullImage(context.Background(), &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: pod}}); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}

	modes := []string{"idle", "off", "wait", "requeue"}
	times := map[string][]time.Duration{}
	for b.Loop() {
		for _, mode := range modes {
			remove(append([]string{pod}, warm...)...)
			if mode == "idle" {
				times[mode] = append(times[mode], podPull())
				continue
			}
			agent, metrics := startAgent(b, cp, bin, node, ctd, "--yield-to-kubelet="+mode)
			iw := build.ImageWarm("default", "beside", build.Images(warm...))
			if err := cp.Client.Create(context.Background(), iw); err != nil {
				b.Fatal(err)
			}
			eventually(b, time.Minute, "three warm pulls under way", func() error {
				s, err := tryScrape(metrics)
				if err != nil {
					return err
				}
				if n := sumSamples(s, "warmer_image_pulls_in_flight"); n < 3 {
					return fmt.Errorf("%v in flight", n)
				}
				return nil
			})
			time.Sleep(time.Second)
			times[mode] = append(times[mode], podPull())
			if err := cp.Client.Delete(context.Background(), iw); err != nil {
				b.Fatal(err)
			}
			eventually(b, time.Minute, "no warm pull under way", func() error {
				if n := sumSamples(scrape(b, metrics), "warmer_image_pulls_in_flight"); n > 0 {
					return fmt.Errorf("%v in flight", n)
				}
				return nil
			})
			agent.Stop()
		}
	}
	idle := median(times["idle"])
	for _, mode := range modes {
		m := median(times[mode])
		b.ReportMetric(m.Seconds(), "s-pod-"+mode)
		b.ReportMetric(m.Seconds()/idle.Seconds(), "pod-x-idle-"+mode)
		b.Logf("%-8s pod pull %v (rounds %v), %.2fx idle", mode, m.Round(10*time.Millisecond), times[mode], m.Seconds()/idle.Seconds())
	}
}
