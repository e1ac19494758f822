package perf

import (
	"fmt"
	"os"
	"slices"
	"testing"
	"time"
)

// reportWarmRounds prints the case's table and reports its medians: the
// product's two clocks (NodeWarm, ImageWarm Ready) beside raw CRI, Ready
// against raw CRI all at once, Ready after the NodeWarm, and the writes a
// warm costs the agent and the controller.
func reportWarmRounds(b *testing.B, name string, images int, rounds []warmRound) {
	b.Helper()
	pick := func(f func(warmRound) time.Duration) []time.Duration {
		out := make([]time.Duration, len(rounds))
		for i, r := range rounds {
			out[i] = f(r)
		}
		return out
	}
	count := func(f func(warmRound) float64) []float64 {
		out := make([]float64, len(rounds))
		for i, r := range rounds {
			out[i] = f(r)
		}
		return out
	}
	agent := pick(func(r warmRound) time.Duration { return r.agent })
	ready := pick(func(r warmRound) time.Duration { return r.ready })
	lag := pick(func(r warmRound) time.Duration { return r.ready - r.agent })
	wide := pick(func(r warmRound) time.Duration { return r.wide })
	direct := pick(func(r warmRound) time.Duration { return r.direct })
	serial := pick(func(r warmRound) time.Duration { return r.serial })
	nwWrites := count(func(r warmRound) float64 { return r.nwWrites })
	iwWrites := count(func(r warmRound) float64 { return r.iwWrites })
	ratio := median(agent).Seconds() / median(direct).Seconds()
	readyRatio := median(ready).Seconds() / median(wide).Seconds()
	// Ready against raw CRI at the agent's own parallelism: what the
	// product adds, apart from pulling fewer images at once (issue 23).
	readyOwn := median(ready).Seconds() / median(direct).Seconds()

	w := os.Stdout
	fmt.Fprintf(w, "\nTime to warm %s, %d round(s): the product end to end vs raw CRI\n", name, len(rounds))
	fmt.Fprintf(w, "| %-48s | %8s | %8s | %8s |\n|%s|---------:|---------:|---------:|\n", "path", "median", "min", "max", "--------------------------------------------------")
	row := func(label string, ds []time.Duration) {
		fmt.Fprintf(w, "| %-48s | %7.3fs | %7.3fs | %7.3fs |\n", label, median(ds).Seconds(), slices.Min(ds).Seconds(), slices.Max(ds).Seconds())
	}
	row("warmer: ImageWarm created → NodeWarm all present", agent)
	row("warmer: ImageWarm created → ImageWarm Ready", ready)
	row("warmer: Ready after the NodeWarm", lag)
	row(fmt.Sprintf("raw CRI, %d in parallel (all at once)", images), wide)
	row(fmt.Sprintf("raw CRI, %d in parallel (the agent's default)", warmParallelism), direct)
	row("raw CRI, serial", serial)
	fmt.Fprintf(w, "Ready / raw CRI all at once %.3f; Ready / raw CRI %d in parallel %.3f; NodeWarm / raw CRI %d in parallel %.3f; Ready after the NodeWarm: median %.0f ms\n",
		readyRatio, warmParallelism, readyOwn, warmParallelism, ratio, ms(median(lag)))
	fmt.Fprintf(w, "status writes per warm: NodeWarm median %.0f, max %.0f; ImageWarm median %.0f, max %.0f\n\n",
		median(nwWrites), slices.Max(nwWrites), median(iwWrites), slices.Max(iwWrites))
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(median(agent).Seconds(), "agent-s")
	b.ReportMetric(median(ready).Seconds(), "ready-s")
	b.ReportMetric(median(wide).Seconds(), "direct-all-s")
	b.ReportMetric(median(direct).Seconds(), "direct-s")
	b.ReportMetric(median(serial).Seconds(), "serial-s")
	b.ReportMetric(ratio, "agent/direct")
	b.ReportMetric(readyRatio, "ready/direct-all")
	b.ReportMetric(readyOwn, "ready/direct")
	b.ReportMetric(ms(median(lag)), "ready-lag-ms")
	b.ReportMetric(slices.Max(nwWrites), "nw-writes/warm")
	b.ReportMetric(slices.Max(iwWrites), "iw-writes/warm")
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
