package credprovider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"time"

	credv1 "k8s.io/kubelet/pkg/apis/credentialprovider/v1"

	"github.com/warmer-dev/warmer/internal/truncate"
)

// DefaultTimeout bounds one plugin run, as the kubelet's catch-all minute.
const DefaultTimeout = time.Minute

// maxResponse bounds what is read of a plugin's stdout: an answer is a few
// hundred bytes; a plugin printing without end must not fill the agent.
const maxResponse = 1 << 20

// plugin is one provider's executable and how to run it.
type plugin struct {
	name       string
	apiVersion string
	bin        string
	args       []string
	env        []string // "NAME=value", after the agent's own
	timeout    time.Duration
}

// request is a CredentialProviderRequest in the provider's apiVersion.
func (p *plugin) request(image string) ([]byte, error) {
	req := credv1.CredentialProviderRequest{Image: image}
	req.APIVersion, req.Kind = p.apiVersion, "CredentialProviderRequest"
	return json.Marshal(req)
}

// run execs the plugin for image and decodes its answer. The plugin's
// stderr is dropped and its stdout never quoted: both may hold secrets.
func (p *plugin) run(ctx context.Context, image string, environ []string) (*credv1.CredentialProviderResponse, error) {
	in, err := p.request(image)
	if err != nil {
		return nil, p.fail(KindExec, "encoding the request: %v", err)
	}
	runCtx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	out := &limitedBuffer{max: maxResponse}
	cmd := exec.CommandContext(runCtx, p.bin, p.args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(in), out, io.Discard
	cmd.Env = append(slices.Clip(environ), p.env...)
	// A plugin's child that keeps stdout open must not hold the pull.
	cmd.WaitDelay = 2 * time.Second
	err = cmd.Run()
	switch {
	case ctx.Err() != nil:
		return nil, fmt.Errorf("credential provider %q: %w", p.name, context.Cause(ctx))
	case runCtx.Err() != nil:
		return nil, p.fail(KindTimeout, "no answer within %s", p.timeout)
	case err != nil:
		return nil, p.fail(KindExec, "%v", err)
	case out.over:
		return nil, p.fail(KindBadResponse, "more than %d bytes on stdout", maxResponse)
	}
	return p.decode(out.Bytes())
}

// decode reads a CredentialProviderResponse, which must come in the
// request's apiVersion and carry a known cacheKeyType. Its errors quote
// only the apiVersion, kind and cacheKeyType, bounded.
func (p *plugin) decode(data []byte) (*credv1.CredentialProviderResponse, error) {
	var resp credv1.CredentialProviderResponse
	if err := json.Unmarshal(data, &resp); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			return nil, p.fail(KindBadResponse, "stdout is not JSON (error at byte %d of %d)", syn.Offset, len(data))
		}
		return nil, p.fail(KindBadResponse, "stdout is not a CredentialProviderResponse (unexpected JSON structure)")
	}
	switch {
	case resp.APIVersion != p.apiVersion:
		return nil, p.fail(KindBadResponse, "response apiVersion %q, want %q", short(resp.APIVersion), p.apiVersion)
	case resp.Kind != "CredentialProviderResponse":
		return nil, p.fail(KindBadResponse, "response kind %q, want CredentialProviderResponse", short(resp.Kind))
	case resp.CacheDuration != nil && resp.CacheDuration.Duration < 0:
		return nil, p.fail(KindBadResponse, "negative cacheDuration %s", resp.CacheDuration.Duration)
	}
	switch resp.CacheKeyType {
	case credv1.ImagePluginCacheKeyType, credv1.RegistryPluginCacheKeyType, credv1.GlobalPluginCacheKeyType:
	default:
		return nil, p.fail(KindBadResponse, "cacheKeyType %q is not Image, Registry or Global", short(string(resp.CacheKeyType)))
	}
	return &resp, nil
}

func (p *plugin) fail(kind Kind, format string, args ...any) error {
	return &Error{Provider: p.name, Kind: kind, Detail: fmt.Sprintf(format, args...)}
}

func short(s string) string { return truncate.String(s, 64) }

// limitedBuffer keeps the first max bytes written and notes whether more
// came; it never fails a write, so the plugin is not killed by SIGPIPE
// mid-answer.
type limitedBuffer struct {
	bytes.Buffer
	max  int
	over bool
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.Len(); len(p) > room {
		b.over = true
		if room > 0 {
			b.Buffer.Write(p[:room])
		}
		return len(p), nil
	}
	return b.Buffer.Write(p)
}
