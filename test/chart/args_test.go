package chart

import (
	"strconv"
	"strings"
	"testing"
)

// TestExtraArgsRefused checks that the render refuses, in extraArgs, each
// flag the chart's permissions follow, in each of the binary's spellings,
// naming where to set it instead: given there, the chart would install the
// default's roles for a feature the flag turned off (or the reverse). The
// same refusal holds for a flag also set in flags, and for the flags the
// chart sets from other values (in flags too); an unrelated flag passes.
func TestExtraArgsRefused(t *testing.T) {
	privileged := []struct{ role, flag, value string }{
		{"agent", "startup-taint", ""},
		{"agent", "kubelet-address", ""},
		{"controller", "images-from-kinds", "none"},
	}
	for _, p := range privileged {
		spellings := [][]string{
			{"--" + p.flag + "=" + p.value},
			{"--" + p.flag, p.value},
			{"-" + p.flag + "=" + p.value},
			{"-" + p.flag, p.value},
		}
		for _, args := range spellings {
			refused(t, extraArgs(p.role, args...), p.role+".flags."+p.flag)
		}
	}
	refused(t, append(extraArgs("agent", "--registry-qps=2"), "--set", "agent.flags.registry-qps=1"), "agent.flags.registry-qps sets too")
	owned := []struct {
		values []string
		want   string
	}{
		{extraArgs("agent", "--container-runtime-endpoint=unix:///run/other.sock"), "runtime.preset or runtime.socketPath"},
		{[]string{"--set", "agent.flags.container-runtime-endpoint=unix:///run/other.sock"}, "runtime.preset or runtime.socketPath"},
		{extraArgs("agent", "--image-credential-provider-config", "/etc/other.yaml"), "credentialProviders.config"},
		{extraArgs("agent", "--image-credential-provider-bin-dir=/opt/bin"), "credentialProviders.binDir"},
		{extraArgs("agent", "--pull-secret-namespace=other"), "the release's namespace"},
		{extraArgs("controller", "--pull-secret-namespace=other"), "the release's namespace"},
		{extraArgs("controller", "--leader-election-namespace=other"), "the release's namespace"},
	}
	for _, o := range owned {
		refused(t, o.values, o.want)
	}
	for _, role := range []string{"agent", "controller"} {
		if _, err := templateOutput(t, namespace, extraArgs(role, "--zap-log-level=debug", "--zap-devel")...); err != nil {
			t.Errorf("%s.extraArgs with logging flags: %v", role, err)
		}
	}
}

// extraArgs returns helm flags that set role.extraArgs to args, each as a
// string.
func extraArgs(role string, args ...string) []string {
	var out []string
	for i, a := range args {
		out = append(out, "--set-string", role+".extraArgs["+strconv.Itoa(i)+"]="+a)
	}
	return out
}

// refused checks that the render with values fails with a message that
// contains want.
func refused(t *testing.T, values []string, want string) {
	t.Helper()
	if _, err := templateOutput(t, namespace, values...); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("%v: got %v, want a refusal naming %q", values, err, want)
	}
}
