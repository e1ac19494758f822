package credprovider

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	kubeletv1 "k8s.io/kubelet/config/v1"
	"k8s.io/utils/clock"

	"github.com/warmer-dev/warmer/pkg/imageref"
	"github.com/warmer-dev/warmer/pkg/pullengine"
)

// Options configure a Providers.
type Options struct {
	// BinDir is where each provider's executable is, named as the
	// provider (--image-credential-provider-bin-dir).
	BinDir string
	// Timeout bounds one plugin run; 0 means DefaultTimeout.
	Timeout time.Duration
	// Environ is the environment plugins inherit, before the configured
	// env; nil means the agent's own (os.Environ).
	Environ func() []string
	// Registerer is where the runs metric is registered; nil: nowhere.
	Registerer prometheus.Registerer
	// Clock times cache expiry; nil means the real clock.
	Clock clock.PassiveClock
}

// Skipped is a configured provider that is not run, and why.
type Skipped struct {
	Name   string
	Reason string
}

// Providers runs the configured credential-provider plugins. It is safe
// for concurrent use: each provider runs one plugin at a time, so pulls of
// one registry wait for one answer and share it through the cache.
type Providers struct {
	list    []*provider
	skipped []Skipped
	environ func() []string
	clock   clock.PassiveClock
	metrics *metrics
}

var _ pullengine.CredentialProvider = &Providers{}

// provider is one configured plugin with its cache.
type provider struct {
	plugin     plugin
	patterns   []pattern
	defaultTTL time.Duration
	// lock is a one-slot semaphore over the cache and the plugin's runs;
	// a channel, so a cancelled pull stops waiting.
	lock  chan struct{}
	cache cache
}

// New readies the providers of a validated configuration (LoadConfig).
// Like the kubelet, it fails when the bin directory or a provider's
// executable is missing. Providers with tokenAttributes are skipped (see
// the package doc).
func New(cfg *kubeletv1.CredentialProviderConfig, opts Options) (*Providers, error) {
	if _, err := os.Stat(opts.BinDir); err != nil {
		return nil, fmt.Errorf("credential provider bin directory: %w", err)
	}
	ps := &Providers{environ: opts.Environ, clock: opts.Clock, metrics: newMetrics(opts.Registerer)}
	if ps.environ == nil {
		ps.environ = os.Environ
	}
	if ps.clock == nil {
		ps.clock = clock.RealClock{}
	}
	for _, c := range cfg.Providers {
		if c.TokenAttributes != nil {
			ps.skipped = append(ps.skipped, Skipped{Name: c.Name, Reason: "tokenAttributes: service-account-token providers are not supported; the agent pulls for no pod, so it has no service account token to pass"})
			continue
		}
		p, err := newProvider(c, opts)
		if err != nil {
			return nil, err
		}
		ps.list = append(ps.list, p)
	}
	return ps, nil
}

func newProvider(c kubeletv1.CredentialProvider, opts Options) (*provider, error) {
	bin, err := exec.LookPath(filepath.Join(opts.BinDir, c.Name))
	if err != nil {
		return nil, fmt.Errorf("credential provider %q: %w", c.Name, err)
	}
	p := &provider{
		plugin: plugin{name: c.Name, apiVersion: c.APIVersion, bin: bin, args: c.Args,
			timeout: opts.Timeout},
		defaultTTL: c.DefaultCacheDuration.Duration,
		lock:       make(chan struct{}, 1),
	}
	if p.plugin.timeout <= 0 {
		p.plugin.timeout = DefaultTimeout
	}
	for _, e := range c.Env {
		p.plugin.env = append(p.plugin.env, e.Name+"="+e.Value)
	}
	for _, m := range c.MatchImages {
		pat, err := parsePattern(m)
		if err != nil {
			return nil, fmt.Errorf("credential provider %q: matchImages: %w", c.Name, err)
		}
		p.patterns = append(p.patterns, pat)
	}
	return p, nil
}

// Names are the providers that run, in configuration order.
func (ps *Providers) Names() []string {
	out := make([]string, len(ps.list))
	for i, p := range ps.list {
		out[i] = p.plugin.name
	}
	return out
}

// Skipped are the configured providers that do not run.
func (ps *Providers) Skipped() []Skipped { return ps.skipped }

// Credentials implements pullengine.CredentialProvider: each provider
// whose matchImages match ref's repository gives its logins (from its
// cache, or by running its plugin), in configuration order. Failing
// providers are skipped and their errors joined; the others' logins are
// returned all the same.
func (ps *Providers) Credentials(ctx context.Context, ref imageref.Reference) ([]pullengine.Credential, error) {
	if ps == nil {
		return nil, nil
	}
	image := ref.Name()
	var out []pullengine.Credential
	var errs []error
	for _, p := range ps.list {
		if !p.matches(image) {
			continue
		}
		ring, err := ps.keyring(ctx, p, image)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, ring.Lookup(ref)...)
	}
	return out, errors.Join(errs...)
}

func (p *provider) matches(image string) bool {
	for _, pat := range p.patterns {
		if pat.matches(image) {
			return true
		}
	}
	return false
}

// keyring is the provider's answer for image, cached or fresh.
func (ps *Providers) keyring(ctx context.Context, p *provider, image string) (*pullengine.Keyring, error) {
	select {
	case p.lock <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("credential provider %q: %w", p.plugin.name, context.Cause(ctx))
	}
	defer func() { <-p.lock }()
	if ring, ok := p.cache.lookup(image, ps.clock.Now()); ok {
		ps.metrics.cacheHits.WithLabelValues(p.plugin.name).Inc()
		return ring, nil
	}
	resp, err := p.plugin.run(ctx, image, ps.environ())
	ps.metrics.observeRun(p.plugin.name, err)
	if err != nil {
		return nil, err
	}
	ring := pullengine.NewKeyring()
	for key, auth := range resp.Auth {
		// A key that does not parse matches nothing; the rest still serve.
		_ = ring.Add(pullengine.Credential{Registry: key, Username: auth.Username, Password: auth.Password})
	}
	ttl := p.defaultTTL
	if resp.CacheDuration != nil {
		ttl = resp.CacheDuration.Duration
	}
	p.cache.store(image, resp.CacheKeyType, ring, ttl, ps.clock.Now())
	return ring, nil
}
