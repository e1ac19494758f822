package cluster

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// readyAfterListening bounds how long after its probe server listens the
// agent may become Ready: the manifests promise 2 s (a startup probe and a
// readiness probe each every second); the Ready condition's time has whole
// seconds and the kubelet's status sync adds a moment, hence the margin.
// The probes of before (readiness every 10 s, no startup probe) took about
// 9 s.
const readyAfterListening = 4 * time.Second

// checkAgentReadySoon compares the time the agent's Pod became Ready with
// the time its log says the probe server started.
func checkAgentReadySoon(t *testing.T) {
	t.Helper()
	var pods corev1.PodList
	if err := node.Client.List(context.Background(), &pods, client.InNamespace(installNamespace),
		client.MatchingLabels{"app.kubernetes.io/component": "agent"}); err != nil || len(pods.Items) != 1 {
		t.Fatalf("agent pods: %d, %v", len(pods.Items), err)
	}
	pod := pods.Items[0]
	var ready time.Time
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			ready = c.LastTransitionTime.Time
		}
	}
	listening := probeServerStart(t, pod.Name)
	// Ready's time is truncated to the second: it happened before ready+1s.
	delay := ready.Add(time.Second).Sub(listening)
	t.Logf("agent Ready at most %v after its probe server started", delay.Round(10*time.Millisecond))
	if ready.IsZero() || delay > readyAfterListening {
		t.Errorf("agent Ready at %v, %v after its probe server started at %v; want within %v", ready, delay, listening, readyAfterListening)
	}
}

// probeServerStart finds, in the agent's log, when controller-runtime
// started the health probe server.
func probeServerStart(t *testing.T, pod string) time.Time {
	t.Helper()
	out := kubectl(t, "logs", "-n", installNamespace, pod)
	for _, line := range strings.Split(out, "\n") {
		if !strings.Contains(strings.ToLower(line), "starting server") || !strings.Contains(line, "health probe") {
			continue
		}
		var entry struct {
			TS json.RawMessage `json:"ts"`
		}
		if err := json.Unmarshal([]byte(line), &entry); err != nil {
			t.Fatalf("agent log line %q: %v", line, err)
		}
		if ts, ok := parseLogTime(string(entry.TS)); ok {
			return ts
		}
		t.Fatalf("agent log line %q: no time", line)
	}
	t.Fatalf("the agent's log does not say when its probe server started:\n%s", out)
	return time.Time{}
}

// parseLogTime reads zap's time: seconds since the epoch, or RFC 3339.
func parseLogTime(raw string) (time.Time, bool) {
	if f, err := strconv.ParseFloat(raw, 64); err == nil {
		return time.Unix(0, int64(f*float64(time.Second))), true
	}
	ts, err := time.Parse(time.RFC3339Nano, strings.Trim(raw, `"`))
	return ts, err == nil
}
