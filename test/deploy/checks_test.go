package deploy

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// policyName is the ValidatingAdmissionPolicy of config/policy.
const policyName = "warmer-agent-own-nodewarm"

// taintPolicyName is the one that keeps an agent to its own Node's
// startup taint.
const taintPolicyName = "warmer-agent-own-node-taint"

// statusPolicyName is the one that keeps an agent to its own Node's
// ImagesWarm condition.
const statusPolicyName = "warmer-agent-own-node-status"

// outcome is how the API server answers a request.
type outcome string

const (
	// allowed: authorized and admitted. NotFound counts: the request got
	// past authorization and admission to the storage.
	allowed outcome = "allowed"
	// forbiddenByRBAC: refused by the authorizer.
	forbiddenByRBAC outcome = "forbidden by RBAC"
	// deniedByPolicy: authorized, then refused by one of warmer's
	// admission policies.
	deniedByPolicy outcome = "denied by the policy"
)

// check is one request and the answer it should get.
type check struct {
	name string
	do   func(ctx context.Context, c client.WithWatch) error
	want outcome
	// msg, when set, must be in the error's message.
	msg string
}

// verdict classifies an API error. Both the authorizer and the policy
// answer 403; the policy's message names it.
func verdict(err error) (outcome, bool) {
	switch {
	case err == nil, apierrors.IsNotFound(err):
		return allowed, true
	case apierrors.IsForbidden(err) && (strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+policyName+"'") ||
		strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+taintPolicyName+"'") ||
		strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+statusPolicyName+"'") ||
		strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+leversPolicyName+"'") ||
		strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+registriesPolicyName+"'")):
		return deniedByPolicy, true
	case apierrors.IsForbidden(err):
		return forbiddenByRBAC, true
	}
	return "", false
}

// runChecks makes each request in order (later ones may need what earlier
// ones created) and compares the answers.
func runChecks(t *testing.T, c client.WithWatch, checks []check) {
	t.Helper()
	for _, ck := range checks {
		t.Run(ck.name, func(t *testing.T) {
			err := ck.do(context.Background(), c)
			got, ok := verdict(err)
			switch {
			case !ok:
				t.Fatalf("unexpected error: %v", err)
			case got != ck.want:
				t.Errorf("got %s, want %s (error: %v)", got, ck.want, err)
			case ck.msg != "" && (err == nil || !strings.Contains(err.Error(), ck.msg)):
				t.Errorf("error %v does not mention %q", err, ck.msg)
			}
		})
	}
}

// watchOnce opens a watch and closes it at once: enough to be authorized.
func watchOnce(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
	w, err := c.Watch(ctx, list, opts...)
	if err != nil {
		return err
	}
	w.Stop()
	return nil
}
