package testbed

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// RegistryOptions shape a test registry.
type RegistryOptions struct {
	// Name tells registries apart in logs and directory names.
	Name string
	// Username and Password, when set, turn on basic auth (htpasswd).
	Username, Password string
}

// Registry is a docker-registry process serving plain HTTP on loopback.
type Registry struct {
	// Host is host:port, the registry part of image references.
	Host string
	opts RegistryOptions
	dir  string
	proc *process
	t    TB
}

// StartRegistry starts a registry on a free loopback port and stops it at
// cleanup. Its storage lives in a temp dir, so Stop then Start keeps images.
func StartRegistry(t TB, opts RegistryOptions) *Registry {
	t.Helper()
	if opts.Name == "" {
		opts.Name = "reg"
	}
	r := &Registry{opts: opts, dir: shortDir(t, opts.Name), t: t}
	r.Host = fmt.Sprintf("127.0.0.1:%d", FreePort(t))
	if err := r.writeConfig(); err != nil {
		t.Fatalf("registry %s: %v", opts.Name, err)
	}
	r.Start()
	t.Cleanup(r.Stop)
	return r
}

// Authenticated reports whether the registry asks for credentials.
func (r *Registry) Authenticated() bool { return r.opts.Username != "" }

// Username and Password are the registry's credentials, if any.
func (r *Registry) Username() string { return r.opts.Username }

// Password is the registry's password, if any.
func (r *Registry) Password() string { return r.opts.Password }

// Start (re)starts the registry on its port and waits until /v2/ answers.
func (r *Registry) Start() {
	r.t.Helper()
	bin, err := lookPath("docker-registry")
	if err != nil {
		r.t.Fatal(err)
	}
	p, err := startProcess("registry "+r.opts.Name, filepath.Join(r.dir, "registry.log"), nil,
		bin, "serve", filepath.Join(r.dir, "config.yml"))
	if err != nil {
		r.t.Fatal(err)
	}
	r.proc = p
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := waitFor(ctx, p, "answer on /v2/", r.ping); err != nil {
		p.kill()
		r.t.Fatal(err)
	}
}

// Stop stops the registry; its port is then closed. Start brings it back.
func (r *Registry) Stop() {
	if r.proc != nil {
		r.proc.stop(5 * time.Second)
	}
}

// ping succeeds once /v2/ answers 200, or 401 when auth is on.
func (r *Registry) ping(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.Host+"/v2/", nil)
	if err != nil {
		return err
	}
	c := http.Client{Timeout: time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode == http.StatusOK || (r.Authenticated() && resp.StatusCode == http.StatusUnauthorized) {
		return nil
	}
	return fmt.Errorf("GET /v2/: %s", resp.Status)
}

func (r *Registry) writeConfig() error {
	secret := make([]byte, 16)
	if _, err := rand.Read(secret); err != nil {
		return err
	}
	cfg := fmt.Sprintf(`version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: %s
  delete:
    enabled: true
http:
  addr: %s
  secret: %s
`, filepath.Join(r.dir, "data"), r.Host, hex.EncodeToString(secret))
	if r.Authenticated() {
		// docker-registry only accepts bcrypt entries in its htpasswd file.
		hash, err := bcrypt.GenerateFromPassword([]byte(r.opts.Password), bcrypt.MinCost)
		if err != nil {
			return err
		}
		htpasswd := filepath.Join(r.dir, "htpasswd")
		if err := os.WriteFile(htpasswd, []byte(r.opts.Username+":"+string(hash)+"\n"), 0o600); err != nil {
			return err
		}
		cfg += fmt.Sprintf("auth:\n  htpasswd:\n    realm: warmer-testbed\n    path: %s\n", htpasswd)
	}
	return os.WriteFile(filepath.Join(r.dir, "config.yml"), []byte(cfg), 0o600)
}

// randomToken is a short random hex string, for passwords and names.
func randomToken() string {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}
