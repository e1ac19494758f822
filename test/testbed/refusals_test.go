package testbed

import (
	"reflect"
	"testing"
)

// TestParseRefusal checks which log lines count as the API server
// refusing warmer's service accounts, and what an RBAC refusal is read as.
func TestParseRefusal(t *testing.T) {
	agent, ctrl := serviceAccountUser(AgentServiceAccount), serviceAccountUser(ControllerServiceAccount)
	for _, c := range []struct {
		line    string
		refusal bool
		want    *refusedRequest
	}{
		{`W0101 reflector.go:569] failed to list *v1.Secret: secrets is forbidden: User "system:serviceaccount:warmer-system:warmer-agent" cannot list resource "secrets" in API group "" at the cluster scope`,
			true, &refusedRequest{user: agent, verb: "list", resource: "secrets"}},
		{`{"level":"error","msg":"Server rejected event (will not retry!)","error":"events.events.k8s.io \"x.18eb\" is forbidden: User \"system:serviceaccount:warmer-system:warmer-controller\" cannot patch resource \"events\" in API group \"events.k8s.io\" in the namespace \"team-a\""}`,
			true, &refusedRequest{user: ctrl, verb: "patch", group: "events.k8s.io", resource: "events", namespace: "team-a", name: "x.18eb"}},
		{`{"error":"nodewarms.warmer.dev \"n\" is forbidden: User \"system:serviceaccount:warmer-system:warmer-agent\" cannot update resource \"nodewarms/status\" in API group \"warmer.dev\" at the cluster scope"}`,
			true, &refusedRequest{user: agent, verb: "update", group: "warmer.dev", resource: "nodewarms", subresource: "status", name: "n"}},
		{`{"level":"error","msg":"writing NodeWarm","error":"nodewarms.warmer.dev \"node-b\" is forbidden: ValidatingAdmissionPolicy 'warmer-agent-own-nodewarm' with binding 'warmer-agent-own-nodewarm' denied request"}`,
			true, nil},
		{`{"level":"error","error":"events.events.k8s.io \"x\" is forbidden: unable to create new content in namespace team-a because it is being terminated"}`,
			false, nil},
		{`{"level":"info","msg":"Disk guard cannot read the image filesystem","error":"reading the kubelet's summary at https://10.0.0.1:10250/stats/summary: 403 Forbidden: Forbidden (user=system:serviceaccount:warmer-system:warmer-agent, verb=get, resource=nodes, subresource(s)=[stats])"}`,
			true, &refusedRequest{user: agent, verb: "get", resource: "nodes", subresource: "stats"}},
		{`secrets is forbidden: User "alice" cannot get resource "secrets" in API group "" in the namespace "team-b"`, false, nil},
	} {
		got, refusal := parseRefusal(c.line)
		if refusal != c.refusal || !reflect.DeepEqual(got, c.want) {
			t.Errorf("parseRefusal(%s) = %+v, %v; want %+v, %v", c.line, got, refusal, c.want, c.refusal)
		}
	}
}
