package deploy

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/warmer-dev/warmer/test/testbed"
)

// TestAgentsOwnPriorityLevel applies config/flowcontrol and checks, from
// the API server's own answer headers, that the agent's requests are
// classified into the warmer-agents priority level, and that another
// service account of the same namespace (the controller's) is not: the
// FlowSchema must take the agents out of workload-low, and nobody else.
func TestAgentsOwnPriorityLevel(t *testing.T) {
	cp := testbed.StartControlPlane(t)
	mustKubectl(t, cp, "apply", "-k", configDir(t, "flowcontrol"))
	var pl flowcontrolv1.PriorityLevelConfiguration
	if err := cp.Client.Get(context.Background(), client.ObjectKey{Name: "warmer-agents"}, &pl); err != nil {
		t.Fatal(err)
	}
	saUser := func(sa string) *rest.Config {
		return cp.AddUser(t, "system:serviceaccount:"+systemNamespace+":"+sa,
			"system:serviceaccounts", "system:serviceaccounts:"+systemNamespace, "system:authenticated")
	}
	agent, controller := saUser("warmer-agent"), saUser("warmer-controller")
	// The API server loads a new FlowSchema within a few seconds.
	testbed.Poll(t, 100*time.Millisecond, 2*time.Minute, "the agent classified into warmer-agents", func() error {
		if got := priorityLevelUID(t, agent); got != string(pl.UID) {
			return fmt.Errorf("agent's priority level UID %q, want warmer-agents' %q", got, pl.UID)
		}
		return nil
	})
	if got := priorityLevelUID(t, controller); got == "" || got == string(pl.UID) {
		t.Errorf("the controller's requests: priority level UID %q; want another level than warmer-agents (%s)", got, pl.UID)
	}
}

// priorityLevelUID makes one request as cfg's user and returns the
// priority level UID the API server reports having classified it into.
func priorityLevelUID(t *testing.T, cfg *rest.Config) string {
	t.Helper()
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodGet, cfg.Host+"/apis/warmer.dev/v1alpha1/nodewarms?limit=1", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.Header.Get("X-Kubernetes-PF-PriorityLevel-UID")
}
