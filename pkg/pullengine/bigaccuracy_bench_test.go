package pullengine_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/warmer-dev/warmer/pkg/pullengine"
	"github.com/warmer-dev/warmer/test/testbed"
	"github.com/warmer-dev/warmer/test/testbed/faults"
)

// BenchmarkWarmBigImageAccuracy measures how true a large pull's progress
// is, as TestBigImage reads it (the same 2 GB image, link and readings),
// on containerd 2.x and 1.6: each round removes the image and pulls it
// again, the node having learned its unpack rate from the pull before
// (one pull before the rounds). Reported over the rounds: the time left's
// worst error over a pull's last half, either way, beyond a second (a
// reading is up to the engine's progress interval old, and the last
// tenths of a second of a pull have no room for a share of them), as a
// share of the time the pull still took; the share of its readings within
// 20 % (and a second) of that time;
// and the most the bytes fetched and unpacked were ever ahead of what had
// crossed the link and what the snapshots took on disk (0 is right).
func BenchmarkWarmBigImageAccuracy(b *testing.B) {
	reg := testbed.StartRegistry(b, testbed.RegistryOptions{Name: "bigaccuracy"})
	img := reg.Push(b, "ai/big:v1", testbed.BigImage(b, bigImageBytes, bigLayerBytes))
	for _, v := range testbed.ContainerdVersions() {
		b.Run(fmt.Sprintf("2GB/%s", strings.ReplaceAll(v.Name, " ", "")), func(b *testing.B) {
			link := faults.StartLinkProxy(b, reg.Host, bigLinkRate)
			ref := strings.Replace(img.Ref, reg.Host, link.Host, 1)
			n := startNode(b, "node-bigaccuracy", v.Options(b)...)
			store, snaps := n.views(b)
			e := startEngine(b, n.cri, pullengine.Options{Content: store, Snapshots: snaps, StallTimeout: pullengine.DefaultStallTimeout})
			bigPull(b, e, n, link, ref)
			var acc accuracy
			for b.Loop() {
				n.removeAll(b)
				samples, start, end := bigPull(b, e, n, link, ref)
				acc.add(samples, start, end)
			}
			acc.report(b)
		})
	}
}

// accuracy sums up the readings of pulls against the truth.
type accuracy struct {
	over, short          float64 // worst errors of the time left beyond etaSlack, of the time still taken
	given, within        int
	fetchAhead, unpAhead int64
}

// add takes one pull's readings.
func (a *accuracy) add(samples []bigSample, start, end time.Time) {
	half := start.Add(end.Sub(start) / 2)
	for _, s := range samples {
		if s.p.Known {
			a.fetchAhead = max(a.fetchAhead, s.p.Done-s.sent)
			a.unpAhead = max(a.unpAhead, s.p.Unpacked-s.onDisk)
		}
		left, ok := s.p.Left()
		if s.at.Before(half) || !ok {
			continue
		}
		a.given++
		actual := end.Sub(s.at)
		diff := float64(left - actual)
		beyond := max(abs(diff)-float64(etaSlack), 0) / float64(max(actual, time.Millisecond))
		if diff > 0 {
			a.over = max(a.over, beyond)
		} else {
			a.short = max(a.short, beyond)
		}
		if abs(diff) <= etaAim*float64(actual)+float64(etaSlack) {
			a.within++
		}
	}
}

// report prints the row and reports the metrics.
func (a *accuracy) report(b *testing.B) {
	b.Helper()
	load, _ := os.ReadFile("/proc/loadavg")
	share := float64(a.within) / float64(max(a.given, 1))
	fmt.Printf("\nprogress accuracy over %d readings: time left beyond %s over by up to %.0f %%, short by up to %.0f %%, %.0f %% of readings within 20 %% (and %s); bytes ahead: fetched %d, unpacked %d; load average at the end: %s",
		a.given, etaSlack, 100*a.over, 100*a.short, 100*share, etaSlack, a.fetchAhead, a.unpAhead, load)
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(100*a.over, "eta-over-pct")
	b.ReportMetric(100*a.short, "eta-short-pct")
	b.ReportMetric(100*share, "eta-within-20pct")
	b.ReportMetric(float64(max(a.fetchAhead, 0))/(1<<20), "fetched-ahead-MiB")
	b.ReportMetric(float64(max(a.unpAhead, 0))/(1<<20), "unpacked-ahead-MiB")
}
