// Command benchtable reads `go test -bench` output on standard input,
// passes it through, and ends with one table of every benchmark's
// metrics beside warmer's targets (docs/performance.md). It exits non-zero
// when the input shows a failure or holds no benchmark, so `make bench`
// fails with it; a missed target is reported, not failed: these are
// measurements on a shared machine.
//
//	go test -run '^$' -bench . ./test/perf | go run ./test/perf/benchtable
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// target is a bound on one metric of the benchmarks whose name starts
// with prefix.
type target struct {
	prefix, unit string
	max          float64
}

var targets = []target{
	{"BenchmarkTimeToWarm/", "agent/direct", 1.10},
	// ImageWarm Ready: within 1.10 times raw CRI pulling the ten images
	// at once, within 100 ms of the NodeWarm, in no more writes than
	// before Ready stopped waiting for the write interval (issue 14).
	{"BenchmarkTimeToWarm/10x20MB", "ready/direct-all", 1.10},
	{"BenchmarkTimeToWarm/", "ready-lag-ms", 100},
	{"BenchmarkTimeToWarm/10x20MB", "nw-writes/warm", 2},
	{"BenchmarkTimeToWarm/10x20MB", "iw-writes/warm", 3},
	{"BenchmarkWarm", "engine/direct", 1.05},
	// One multi-GB image through the agent within 1.02 times raw CRI
	// (issue 34).
	{"BenchmarkWarmBigImage/", "agent/direct", 1.02},
	// A large pull's bytes fetched and unpacked never ahead of the truth
	// (issue 34).
	{"BenchmarkWarmBigImageAccuracy/", "fetched-ahead-MiB", 0},
	{"BenchmarkWarmBigImageAccuracy/", "unpacked-ahead-MiB", 0},
	// Slots under a mix: a 50 MB image asked for behind three large
	// pulls holding every slot is present within seconds (the 15 s of
	// TestBigDoesNotBlockSmall), and the large pulls take at most 5 %
	// longer than without it (issue 34).
	{"BenchmarkWarmBigAndSmall/", "small-s", 15},
	{"BenchmarkWarmBigAndSmall/", "big-with/alone", 1.05},
	{"BenchmarkScale/", "ready-s", 60},
	// A fleet of nodes with 100 images each Ready within 30 s; every
	// fleet Ready within 2 s of its last pull, and no request refused by
	// priority and fairness (issue 14).
	{"BenchmarkScale/images=100/", "ready-s", 30},
	{"BenchmarkScale/", "ready-after-pull-s", 2},
	{"BenchmarkScale/", "answers-429", 0},
	// Fleets run under the shipped roles and admission policies: none of
	// the agents' requests refused (issue 32).
	{"BenchmarkScale/", "answers-403", 0},
	{"BenchmarkScale/", "answers-422", 0},
	{"BenchmarkPolicyCost/", "answers-403", 0},
	{"BenchmarkPolicyCost/", "answers-422", 0},
	{"BenchmarkScale/", "status-B", 8192},
	{"BenchmarkScale/images=10/", "nw-writes/node", 10 + 2}, // images + 2
	{"BenchmarkScale/images=100/", "nw-writes/node", 100 + 2},
	// Waves: no more nodes pull one image at once than the rollout's
	// maxPulling (issue 12).
	{"BenchmarkScale/images=10/N=1000/maxPulling=100", "peak-pulling", 100},
	// Failures fold per ImageWarm and node: Event objects grow with the
	// nodes, not with nodes x images (issue 23).
	{"BenchmarkFailingFleet/", "event-objects/node", 2},
	// Status budgets (api/v1alpha1/limits.go): an ImageWarm of 100 images
	// at any node count, and a NodeWarm's bytes per image.
	{"BenchmarkImageWarmStatusSize/", "status-B", 8192},
	{"BenchmarkNodeWarmSize", "B/image", 200},
	{"BenchmarkAgentFootprint", "rss-MiB", 32},
	{"BenchmarkAgentFootprint", "millicores", 0.3},
	{"BenchmarkAgentFootprint", "writes/min", 0},
}

// row is one metric of one benchmark.
type row struct {
	bench, unit string
	value       float64
}

// benchLine matches "BenchmarkX-2   <iterations>   <value> <unit> ...".
var benchLine = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+\d+\s+(.*)$`)

func main() {
	rows, failed, err := read(os.Stdin, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		os.Exit(1)
	}
	write(os.Stdout, rows)
	switch {
	case failed:
		fmt.Fprintln(os.Stderr, "benchtable: a benchmark failed")
		os.Exit(1)
	case len(rows) == 0:
		fmt.Fprintln(os.Stderr, "benchtable: no benchmark results in the input")
		os.Exit(1)
	}
}

// read copies in to echo and collects the metrics.
func read(in io.Reader, echo io.Writer) ([]row, bool, error) {
	var rows []row
	failed := false
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		fmt.Fprintln(echo, line)
		if strings.HasPrefix(line, "FAIL") || strings.HasPrefix(line, "--- FAIL") || strings.HasPrefix(line, "panic:") {
			failed = true
		}
		m := benchLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		f := strings.Fields(m[2])
		for i := 0; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil || (f[i+1] == "ns/op" && v == 0) { // 0 ns/op: suppressed as meaningless
				continue
			}
			rows = append(rows, row{bench: m[1], unit: f[i+1], value: v})
		}
	}
	return rows, failed, sc.Err()
}

func write(w io.Writer, rows []row) {
	fmt.Fprintf(w, "\n## Summary\n\n| %-38s | %-18s | %12s | %8s | %-6s |\n|%s|%s|%s|%s|%s|\n",
		"benchmark", "metric", "value", "target", "",
		strings.Repeat("-", 40), strings.Repeat("-", 20), strings.Repeat("-", 13)+":", strings.Repeat("-", 9)+":", strings.Repeat("-", 8))
	for _, r := range rows {
		goal, verdict := "", ""
		for _, t := range targets {
			if strings.HasPrefix(r.bench, t.prefix) && r.unit == t.unit {
				goal, verdict = "≤ "+strconv.FormatFloat(t.max, 'g', -1, 64), "met"
				if r.value > t.max {
					verdict = "missed"
				}
			}
		}
		fmt.Fprintf(w, "| %-38s | %-18s | %12s | %8s | %-6s |\n", strings.TrimPrefix(r.bench, "Benchmark"), r.unit, format(r.value), goal, verdict)
	}
}

// format prints with about four significant digits.
func format(v float64) string {
	switch {
	case v >= 1000:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 3, 64)
	}
}
