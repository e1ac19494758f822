package perf

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/warmer-dev/warmer/test/testbed"
)

// full says whether the long forms were asked for (BENCH_FULL=1): all
// fleet sizes and the ten-minute idle period.
func full() bool { return os.Getenv("BENCH_FULL") == "1" }

// envDuration reads a duration from the environment, with a default.
func envDuration(b *testing.B, name string, def time.Duration) time.Duration {
	b.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		b.Fatalf("%s=%q: %v", name, v, err)
	}
	return d
}

// median is the middle value (the mean of the middle two for an even
// count) of xs, which must not be empty.
func median[T int64 | float64 | time.Duration](xs []T) T {
	s := slices.Clone(xs)
	slices.Sort(s)
	mid := len(s) / 2
	if len(s)%2 == 1 {
		return s[mid]
	}
	return (s[mid-1] + s[mid]) / 2
}

// promSamples parses Prometheus text exposition into sample lines and
// values; lines are kept whole (name and labels) so callers can match on
// label fragments.
func promSamples(r io.Reader) (map[string]float64, error) {
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		out[line[:i]] = v
	}
	return out, sc.Err()
}

// sumSamples adds up the samples of metric whose label sets contain every
// fragment.
func sumSamples(s map[string]float64, metric string, fragments ...string) float64 {
	var sum float64
	for k, v := range s {
		if !strings.HasPrefix(k, metric+"{") && k != metric {
			continue
		}
		ok := true
		for _, f := range fragments {
			ok = ok && strings.Contains(k, f)
		}
		if ok {
			sum += v
		}
	}
	return sum
}

// meanOf is a histogram's mean between two scrapes, from its _sum and
// _count samples whose labels contain every fragment; 0 if none.
func meanOf(before, after map[string]float64, histogram string, fragments ...string) time.Duration {
	n := sumSamples(after, histogram+"_count", fragments...) - sumSamples(before, histogram+"_count", fragments...)
	if n <= 0 {
		return 0
	}
	sum := sumSamples(after, histogram+"_sum", fragments...) - sumSamples(before, histogram+"_sum", fragments...)
	return time.Duration(sum / n * float64(time.Second))
}

// apiMetrics scrapes the API server's /metrics.
func apiMetrics(b *testing.B, cfg *rest.Config) map[string]float64 {
	b.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	// A starved API server (thousands of simulated agents on two cores)
	// may miss one scrape's 30 s: it is tried again for a minute and a
	// half before the run is lost.
	var body []byte
	eventually(b, 90*time.Second, "scraping the API server's metrics", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		body, err = cs.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
		return err
	})
	s, err := promSamples(bytes.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// scrape reads a process's /metrics over loopback.
func scrape(b *testing.B, hostport string) map[string]float64 {
	b.Helper()
	s, err := tryScrape(hostport)
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// tryScrape is scrape for a process that may not listen yet.
func tryScrape(hostport string) (map[string]float64, error) {
	resp, err := http.Get("http://" + hostport + "/metrics")
	if err != nil {
		return nil, fmt.Errorf("scraping %s: %w", hostport, err)
	}
	defer resp.Body.Close()
	return promSamples(resp.Body)
}

// procStat is a process's CPU time and resident memory, from /proc.
type procStat struct {
	cpu time.Duration // user + system
	rss int64         // bytes
	// rssAnon and rssFile split rss: the heap and stacks, and the pages
	// of the executable (and other files) in memory.
	rssAnon, rssFile int64
}

// readProc reads /proc/<pid>/stat (utime, stime in clock ticks of 1/100 s
// on Linux) and VmRSS from /proc/<pid>/status.
func readProc(b *testing.B, pid int) procStat {
	b.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatalf("reading process %d: %v", pid, err)
	}
	// The command name may hold spaces: fields count from after ')'.
	fields := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	st := procStat{cpu: time.Duration(utime+stime) * 10 * time.Millisecond}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			st.rss = kb << 10
		case "RssAnon:":
			st.rssAnon = kb << 10
		case "RssFile:":
			st.rssFile = kb << 10
		}
	}
	return st
}

// startAgent runs the built warmer agent for a node against a containerd,
// with production defaults, and returns its /metrics address.
func startAgent(b *testing.B, cp *testbed.ControlPlane, bin, node string, ctd *testbed.Containerd, extra ...string) (*testbed.Process, string) {
	b.Helper()
	return startAgentIn(b, nil, cp, bin, node, ctd, extra...)
}

// startAgentIn is startAgent with the agent in a memory cgroup, if cg is
// not nil.
func startAgentIn(b *testing.B, cg *testbed.MemoryCgroup, cp *testbed.ControlPlane, bin, node string, ctd *testbed.Containerd, extra ...string) (*testbed.Process, string) {
	b.Helper()
	return startAgentOn(b, cg, cp, bin, node, ctd.Endpoint, extra...)
}

// startAgentOn is startAgentIn for any runtime's CRI endpoint (CRI-O's).
func startAgentOn(b *testing.B, cg *testbed.MemoryCgroup, cp *testbed.ControlPlane, bin, node, endpoint string, extra ...string) (*testbed.Process, string) {
	b.Helper()
	metrics := fmt.Sprintf("127.0.0.1:%d", testbed.FreePort(b))
	args := append([]string{bin, "agent", "--kubeconfig", cp.AgentKubeconfig(b, node), "--node-name", node,
		"--container-runtime-endpoint", endpoint, "--metrics-bind-address", metrics,
		"--health-probe-bind-address", "0",
		// The image filesystem is a folder on the machine's shared disk,
		// often filled past the agent's 80% by builds and caches.
		"--image-fs-threshold-percent=99"}, extra...)
	if cg != nil {
		args = cg.Command(args...)
	}
	p := testbed.StartProcess(b, "agent "+node, args...)
	b.Cleanup(func() {
		if b.Failed() {
			b.Logf("agent log:\n%s", p.Log(80))
		}
	})
	return p, metrics
}

// startController runs the built warmer controller with production
// defaults, leader election included (its /metrics plain), and returns its /metrics address once
// it leads.
func startController(b *testing.B, cp *testbed.ControlPlane, bin string) string {
	b.Helper()
	metrics := fmt.Sprintf("127.0.0.1:%d", testbed.FreePort(b))
	p := testbed.StartProcess(b, "controller", bin, "controller", "--kubeconfig", cp.ControllerKubeconfig(b),
		"--leader-election-namespace", testbed.SystemNamespace, "--metrics-bind-address", metrics, "--health-probe-bind-address", "0",
		// Scraped often while measured: a TokenReview and a
		// SubjectAccessReview per scrape would add to the API load
		// the benchmarks count.
		"--metrics-secure=false")
	b.Cleanup(func() {
		if b.Failed() {
			b.Logf("controller log:\n%s", p.Log(40))
		}
	})
	eventually(b, time.Minute, "the controller leads", func() error {
		s, err := tryScrape(metrics)
		if err != nil {
			return err
		}
		if sumSamples(s, "leader_election_master_status") != 1 {
			return errors.New("not the leader yet")
		}
		return nil
	})
	return metrics
}

// eventually retries check every 50 ms until it returns nil, or fails the
// benchmark after timeout.
func eventually(b *testing.B, timeout time.Duration, what string, check func() error) {
	b.Helper()
	testbed.Poll(b, 50*time.Millisecond, timeout, what, check)
}
