package credprovider

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletv1 "k8s.io/kubelet/config/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/warmer-dev/warmer/pkg/imageref"
)

// The plugin these tests run is a real executable (testdata/fakeplugin),
// built once; only its answers are chosen by its flags.
var pluginBuild struct {
	once sync.Once
	path string
	err  error
}

func buildPlugin(t *testing.T) string {
	t.Helper()
	pluginBuild.once.Do(func() {
		dir, err := os.MkdirTemp("", "credprovider-test-")
		if err != nil {
			pluginBuild.err = err
			return
		}
		pluginBuild.path = filepath.Join(dir, "fakeplugin")
		out, err := exec.Command("go", "build", "-o", pluginBuild.path, "./testdata/fakeplugin").CombinedOutput()
		if err != nil {
			pluginBuild.err = errors.New(string(out))
		}
	})
	if pluginBuild.err != nil {
		t.Fatal(pluginBuild.err)
	}
	return pluginBuild.path
}

func TestMain(m *testing.M) {
	code := m.Run()
	if pluginBuild.path != "" {
		_ = os.RemoveAll(filepath.Dir(pluginBuild.path))
	}
	os.Exit(code)
}

const (
	testUser     = "robot"
	testPassword = "s3cret-from-plugin"
)

// fixture is a bin directory holding the plugin under the provider's name,
// and a count file the plugin appends each request to.
type fixture struct {
	binDir, count string
	clock         *clocktesting.FakePassiveClock
	reg           *prometheus.Registry
}

func newFixture(t *testing.T, names ...string) *fixture {
	t.Helper()
	bin := buildPlugin(t)
	f := &fixture{binDir: t.TempDir(), clock: clocktesting.NewFakePassiveClock(time.Unix(1_000_000, 0)), reg: prometheus.NewRegistry()}
	f.count = filepath.Join(t.TempDir(), "count")
	for _, n := range names {
		if err := os.Symlink(bin, filepath.Join(f.binDir, n)); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func (f *fixture) runs(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(f.count)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(b))
}

func (f *fixture) provider(name string, match []string, ttl time.Duration, args ...string) kubeletv1.CredentialProvider {
	return kubeletv1.CredentialProvider{
		Name: name, MatchImages: match, DefaultCacheDuration: &metav1.Duration{Duration: ttl},
		APIVersion: "credentialprovider.kubelet.k8s.io/v1",
		Args:       append([]string{"--count", f.count}, args...),
		Env:        []kubeletv1.ExecEnvVar{{Name: "FAKE_USERNAME", Value: testUser}, {Name: "FAKE_PASSWORD", Value: testPassword}},
	}
}

func (f *fixture) start(t *testing.T, timeout time.Duration, ps ...kubeletv1.CredentialProvider) *Providers {
	t.Helper()
	cfg := &kubeletv1.CredentialProviderConfig{Providers: ps}
	if err := Validate(cfg); err != nil {
		t.Fatal(err)
	}
	p, err := New(cfg, Options{BinDir: f.binDir, Timeout: timeout, Clock: f.clock, Registerer: f.reg})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func ref(t *testing.T, image string) imageref.Reference {
	t.Helper()
	r, err := imageref.Parse(image)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestCredentialsFromPlugin(t *testing.T) {
	f := newFixture(t, "fake")
	p := f.start(t, 0, f.provider("fake", []string{"*.example.com:5000"}, time.Minute))
	creds, err := p.Credentials(context.Background(), ref(t, "reg.example.com:5000/team/app:v1"))
	if err != nil {
		t.Fatal(err)
	}
	if len(creds) != 1 || creds[0].Username != testUser || creds[0].Password != testPassword || creds[0].Registry != "reg.example.com:5000" {
		t.Fatalf("credentials = %v; want the plugin's login for reg.example.com:5000", creds)
	}
	// The request names the repository, without tag, as the kubelet's.
	if got := f.runs(t); len(got) != 1 || got[0] != "reg.example.com:5000/team/app" {
		t.Fatalf("plugin requests = %q; want one for reg.example.com:5000/team/app", got)
	}
	// An image no pattern matches does not run the plugin.
	if creds, err := p.Credentials(context.Background(), ref(t, "other.io/app:v1")); err != nil || len(creds) != 0 {
		t.Fatalf("unmatched image: %v, %v; want nothing", creds, err)
	}
	if n := len(f.runs(t)); n != 1 {
		t.Fatalf("plugin ran %d times; want 1 (an unmatched image runs nothing)", n)
	}
	if p.Names()[0] != "fake" || len(p.Skipped()) != 0 {
		t.Fatalf("Names = %v, Skipped = %v", p.Names(), p.Skipped())
	}
}

// TestCache checks each cacheKeyType's reach and the durations: the
// answer's own, the provider's default when it gives none, and 0 for
// no caching.
func TestCache(t *testing.T) {
	tests := []struct {
		name string
		args []string
		ttl  time.Duration // the provider's defaultCacheDuration
		// images asked in turn, with whether each runs the plugin
		steps []step
	}{
		{"Image key, default duration", []string{"--key-type", "Image"}, time.Minute, []step{
			{"r.io/a:v1", 0, true}, {"r.io/a:v2", 0, false}, {"r.io/b:v1", 0, true},
			{"r.io/a:v1", 59 * time.Second, false}, {"r.io/a:v1", time.Second, true},
		}},
		{"Registry key", []string{"--key-type", "Registry"}, time.Minute, []step{
			{"r.io/a:v1", 0, true}, {"r.io/b:v1", 0, false}, {"s.r.io/b:v1", 0, true},
		}},
		{"Global key", []string{"--key-type", "Global", "--auth-key", "*.r.io"}, time.Minute, []step{
			{"a.r.io/a:v1", 0, true}, {"b.r.io/b:v1", 0, false},
		}},
		{"response duration beats the default", []string{"--cache-duration", "10s"}, time.Hour, []step{
			{"r.io/a:v1", 0, true}, {"r.io/a:v1", 9 * time.Second, false}, {"r.io/a:v1", time.Second, true},
		}},
		{"response duration 0: not cached", []string{"--cache-duration", "0s"}, time.Hour, []step{
			{"r.io/a:v1", 0, true}, {"r.io/a:v1", 0, true},
		}},
		{"default duration 0: not cached", nil, 0, []step{
			{"r.io/a:v1", 0, true}, {"r.io/a:v1", 0, true},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, "fake")
			p := f.start(t, 0, f.provider("fake", []string{"r.io", "*.r.io"}, tt.ttl, tt.args...))
			for i, s := range tt.steps {
				f.clock.SetTime(f.clock.Now().Add(s.after))
				before := len(f.runs(t))
				creds, err := p.Credentials(context.Background(), ref(t, s.image))
				if err != nil || len(creds) != 1 {
					t.Fatalf("step %d (%s): %v, %v; want one login", i, s.image, creds, err)
				}
				if ran := len(f.runs(t)) > before; ran != s.runs {
					t.Fatalf("step %d (%s, %s later): plugin ran = %v; want %v", i, s.image, s.after, ran, s.runs)
				}
			}
		})
	}
}

type step struct {
	image string
	after time.Duration
	runs  bool
}

// TestPluginFailures checks that every way a plugin fails gives a
// classified error that names the provider but none of its output.
func TestPluginFailures(t *testing.T) {
	tests := []struct {
		mode string
		want Kind
	}{
		{"exit", KindExec},
		{"badjson", KindBadResponse},
		{"wrongversion", KindBadResponse},
		{"sleep", KindTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			f := newFixture(t, "fake", "good")
			p := f.start(t, 500*time.Millisecond,
				f.provider("fake", []string{"r.io"}, time.Minute, "--mode", tt.mode),
				f.provider("good", []string{"r.io"}, time.Minute, "--auth-key", "r.io/a"))
			start := time.Now()
			creds, err := p.Credentials(context.Background(), ref(t, "r.io/a:v1"))
			if took := time.Since(start); took > 10*time.Second {
				t.Fatalf("took %s; the timeout is 0.5 s", took)
			}
			var pe *Error
			if !errors.As(err, &pe) || pe.Kind != tt.want || pe.Provider != "fake" {
				t.Fatalf("error = %v; want a %s error of provider fake", err, tt.want)
			}
			if strings.Contains(err.Error(), testPassword) {
				t.Fatalf("error %q holds the plugin's password", err)
			}
			// The other provider still serves.
			if len(creds) != 1 || creds[0].Registry != "r.io/a" {
				t.Fatalf("credentials = %v; want the good provider's", creds)
			}
			if got := testutil.ToFloat64(p.metrics.runs.WithLabelValues("fake", string(tt.want))); got != 1 {
				t.Fatalf("runs{fake,%s} = %v; want 1", tt.want, got)
			}
			// A failure is not cached: the next pull asks again.
			_, _ = p.Credentials(context.Background(), ref(t, "r.io/a:v1"))
			if n := strings.Count(strings.Join(f.runs(t), "\n"), "r.io/a"); n != 3 {
				t.Fatalf("plugin runs = %d; want 3 (fake twice, good once)", n)
			}
		})
	}
}

func TestCancelledPullStopsPlugin(t *testing.T) {
	f := newFixture(t, "fake")
	p := f.start(t, time.Hour, f.provider("fake", []string{"r.io"}, time.Minute, "--mode", "sleep"))
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := p.Credentials(ctx, ref(t, "r.io/a:v1"))
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 10*time.Second {
		t.Fatalf("error = %v after %s; want the pull's own deadline, promptly", err, time.Since(start))
	}
}

func TestNewRefusals(t *testing.T) {
	f := newFixture(t, "fake")
	if _, err := New(&kubeletv1.CredentialProviderConfig{Providers: []kubeletv1.CredentialProvider{f.provider("missing", []string{"r.io"}, 0)}},
		Options{BinDir: f.binDir}); err == nil || !strings.Contains(err.Error(), `"missing"`) {
		t.Fatalf("missing executable: %v; want an error naming the provider", err)
	}
	if _, err := New(&kubeletv1.CredentialProviderConfig{Providers: []kubeletv1.CredentialProvider{f.provider("fake", []string{"r.io"}, 0)}},
		Options{BinDir: filepath.Join(f.binDir, "nope")}); err == nil {
		t.Fatal("missing bin directory accepted")
	}
	sa := f.provider("fake", []string{"r.io"}, 0)
	sa.TokenAttributes = &kubeletv1.ServiceAccountTokenAttributes{ServiceAccountTokenAudience: "aud"}
	p, err := New(&kubeletv1.CredentialProviderConfig{Providers: []kubeletv1.CredentialProvider{sa}}, Options{BinDir: f.binDir})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Names()) != 0 || len(p.Skipped()) != 1 || !strings.Contains(p.Skipped()[0].Reason, "tokenAttributes") {
		t.Fatalf("a tokenAttributes provider: names %v, skipped %v; want it skipped with the reason", p.Names(), p.Skipped())
	}
	if creds, err := p.Credentials(context.Background(), ref(t, "r.io/a:v1")); len(creds) != 0 || err != nil || len(f.runs(t)) != 0 {
		t.Fatalf("a skipped provider ran: %v, %v", creds, err)
	}
}
