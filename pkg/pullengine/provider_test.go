package pullengine

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/warmer-dev/warmer/pkg/pullengine/pull"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/warmer-dev/warmer/pkg/imageref"
)

// stubProvider stands in for pkg/credprovider, which runs real plugins in
// its own tests: here only the order of candidates and the outcome's class
// are at stake.
type stubProvider struct {
	creds []Credential
	err   error
	calls int
}

func (s *stubProvider) Credentials(context.Context, imageref.Reference) ([]Credential, error) {
	s.calls++
	return s.creds, s.err
}

var errUnauthorized = status.Error(codes.Unknown, "failed to pull and unpack image: failed to resolve reference: pull access denied, repository does not exist or may require authorization: server message: insufficient_scope: authorization failed")

func TestProviderCredentialsAfterSecrets(t *testing.T) {
	const image = "registry.test/team/app:v1"
	prov := &stubProvider{creds: []Credential{
		{Registry: "registry.test", Username: "plugin", Password: "plugin-pass"},
		{Registry: "registry.test", Username: "secret", Password: "secret-pass"}, // a duplicate login is tried once
	}}
	h := newHarness(t, Options{Credentials: prov})
	ring := NewKeyring()
	if err := ring.Add(Credential{Registry: "registry.test/team", Username: "secret", Password: "secret-pass"}); err != nil {
		t.Fatal(err)
	}
	h.svc.failWith(image, errUnauthorized) // the secret's login is refused
	h.eng.Enqueue(h.ctx, Request{Image: image, Keyring: ring})
	res := h.result(t)
	if !res.Succeeded() || res.Attempts != 2 {
		t.Fatalf("result %+v; want success on the second candidate", res)
	}
	if u := h.svc.pullAt(0).auth.GetUsername(); u != "secret" {
		t.Errorf("first candidate %q; want the pull secret's login first, as the kubelet", u)
	}
	if u := h.svc.pullAt(1).auth.GetUsername(); u != "plugin" {
		t.Errorf("second candidate %q; want the provider's login", u)
	}
	if len(h.svc.pulled()) != 2 || prov.calls != 1 {
		t.Errorf("pulls %v, provider calls %d; want 2 pulls and one call", h.svc.pulled(), prov.calls)
	}
}

func TestProviderFailureClass(t *testing.T) {
	const image = "registry.test/team/app:v1"
	provErr := errors.New(`credential provider "ecr": PluginTimeout: no answer within 1m0s`)
	tests := []struct {
		name    string
		pullErr error
		want    Class
	}{
		{"refused without the plugin's login", errUnauthorized, pull.ClassCredentialProviderFailed},
		{"another failure keeps its own class", status.Error(codes.NotFound, "failed to resolve reference: registry.test/team/app:v1: not found"), pull.ClassNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Options{Credentials: &stubProvider{err: provErr}})
			h.svc.failWith(image, tt.pullErr)
			h.eng.Enqueue(h.ctx, Request{Image: image})
			res := h.result(t)
			if res.Class != tt.want {
				t.Fatalf("class %s (%s); want %s", res.Class, res.Message, tt.want)
			}
			if tt.want == pull.ClassCredentialProviderFailed && !strings.HasPrefix(res.Message, provErr.Error()) {
				t.Errorf("message %q; want it to start with the provider's error", res.Message)
			}
			if a := h.svc.pullAt(0).auth; a != nil {
				t.Errorf("pulled with %v; want anonymously, as the kubelet goes on without a failed plugin", a)
			}
		})
	}
}
