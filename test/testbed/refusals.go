package testbed

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"

	authorizationv1 "k8s.io/api/authorization/v1"
)

// planes are the control planes of the kubeconfigs minted by
// AgentKubeconfig and ControllerKubeconfig, by path: a process started with
// one has its log checked for refusals against that plane (checkRefusals).
var planes sync.Map

// checkRefusals fails the test if the API server refused warmer's service
// accounts something in the log of a process started with a kubeconfig of
// theirs: a permission the code needs and config/rbac lacks, or a write
// config/policy denies. The process may carry on after one (an event
// dropped, a cache that never syncs), so the test might otherwise pass.
//
// An RBAC refusal counts only if the roles still refuse it at the end (a
// SubjectAccessReview): a restarted API server refuses everything for a
// moment, until its authorizer's cache has the roles again.
func checkRefusals(t TB, name string, argv []string, logPath string) {
	v, ok := planes.Load(flagValue(argv, "--kubeconfig"))
	if !ok {
		return
	}
	cp := v.(*ControlPlane)
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Logf("%s: reading the log for refusals: %v", name, err)
		return
	}
	var refused []string
	still := map[refusedRequest]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		r, ok := parseRefusal(line)
		if !ok {
			continue
		}
		if r != nil {
			if _, seen := still[*r]; !seen {
				still[*r] = cp.refuses(*r)
			}
			if !still[*r] {
				continue
			}
		}
		refused = append(refused, line)
	}
	if len(refused) == 0 {
		return
	}
	if len(refused) > 10 {
		refused = append(refused[:10], fmt.Sprintf("... and %d more", len(refused)-10))
	}
	msg := fmt.Sprintf("%s was refused by the API server as shipped (config/rbac, config/policy):\n%s", name, strings.Join(refused, "\n"))
	// As for race reports: Errorf lets the other cleanups run; a TB
	// without it (a Shared bed) stops here.
	if e, ok := t.(interface{ Errorf(string, ...any) }); ok {
		e.Errorf("%s", msg)
		return
	}
	t.Fatal(msg)
}

// flagValue is the value of a flag on a command line, as --flag value or
// --flag=value; empty if absent.
func flagValue(argv []string, flag string) string {
	for i, a := range argv {
		if a == flag && i+1 < len(argv) {
			return argv[i+1]
		}
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			return v
		}
	}
	return ""
}

// refusedRequest is what an RBAC refusal message says was refused.
type refusedRequest struct {
	user, verb, group, resource, subresource, namespace, name string
}

// rbacRefusal matches the API server's RBAC refusal of one of warmer's
// service accounts (k8s.io/apiserver's forbiddenMessage), after the
// quotes of a JSON log are unescaped: "<resource>[.<group>] ["<name>"] is
// forbidden: User "<user>" cannot <verb> resource "<resource>[/<sub>]" in
// API group "<group>" (in the namespace "<ns>" | at the cluster scope).
var rbacRefusal = regexp.MustCompile(`(?:"([^"]*)" )?is forbidden: User "(system:serviceaccount:` + SystemNamespace +
	`:[^"]+)" cannot (\w+) resource "([^"/]+)(?:/([^"]+))?" in API group "([^"]*)" (?:in the namespace "([^"]+)"|at the cluster scope)`)

// kubeletRefusal matches a kubelet's refusal of one of warmer's service
// accounts, which it checks with a SubjectAccessReview of its own (the
// disk guard reading /stats/summary): "Forbidden (user=<user>,
// verb=<verb>, resource=<resource>, subresource(s)=[<sub>])".
var kubeletRefusal = regexp.MustCompile(`Forbidden \(user=(system:serviceaccount:` + SystemNamespace +
	`:[^,]+), verb=(\w+), resource=([^,]+), subresource\(s\)=\[([^\]]*)\]\)`)

// parseRefusal says whether a log line reports a refusal of one of
// warmer's service accounts. For an RBAC refusal, by the API server or a
// kubelet, it returns the request; for a denial by one of warmer's
// admission policies, or a refusal it cannot read, nil, and the refusal
// counts as it is.
func parseRefusal(line string) (*refusedRequest, bool) {
	if strings.Contains(line, "ValidatingAdmissionPolicy 'warmer-") {
		return nil, true
	}
	if m := kubeletRefusal.FindStringSubmatch(line); m != nil {
		return &refusedRequest{user: m[1], verb: m[2], resource: m[3], subresource: m[4]}, true
	}
	line = strings.ReplaceAll(line, `\"`, `"`)
	if !strings.Contains(line, "is forbidden: User \"system:serviceaccount:"+SystemNamespace+":") {
		return nil, false
	}
	m := rbacRefusal.FindStringSubmatch(line)
	if m == nil {
		return nil, true
	}
	return &refusedRequest{name: m[1], user: m[2], verb: m[3], resource: m[4], subresource: m[5], group: m[6], namespace: m[7]}, true
}

// refuses asks the API server whether RBAC refuses r now. An error
// answering counts as a refusal: it is not cleared.
func (cp *ControlPlane) refuses(r refusedRequest) bool {
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:   r.user,
		Groups: serviceAccountGroups,
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: r.namespace, Verb: r.verb, Group: r.group,
			Resource: r.resource, Subresource: r.subresource, Name: r.name},
	}}
	if err := cp.Client.Create(context.Background(), sar); err != nil {
		return true
	}
	return !sar.Status.Allowed
}
