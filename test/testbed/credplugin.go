package testbed

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"github.com/warmer-dev/warmer/test/testbed/hostcheck"
)

// CredentialPlugin is a credential-provider plugin set up for a test: a
// bin directory holding the test plugin (pkg/credprovider/testdata/
// fakeplugin) under each provider's name, and the CredentialProviderConfig
// that names them, as the kubelet and the agent read them.
type CredentialPlugin struct {
	// BinDir is --image-credential-provider-bin-dir.
	BinDir string
	// Config is --image-credential-provider-config.
	Config string
	// Count is the file the plugin appends each request's image to.
	Count string
}

// PluginProvider is one provider of a CredentialPlugin's configuration.
type PluginProvider struct {
	Name        string
	MatchImages []string
	// CacheDuration is defaultCacheDuration, e.g. "1h".
	CacheDuration string
	// Args choose the plugin's answer (see fakeplugin's flags).
	Args []string
	// Username and Password are the login it hands out.
	Username, Password string
}

// Flags are the agent's flags for the plugin.
func (c *CredentialPlugin) Flags() []string {
	return []string{"--image-credential-provider-config", c.Config, "--image-credential-provider-bin-dir", c.BinDir}
}

// Runs lists the images the plugin was run for, in order.
func (c *CredentialPlugin) Runs(t TB) []string {
	t.Helper()
	b, err := os.ReadFile(c.Count)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(b))
}

var pluginBuild struct {
	once sync.Once
	path string
	err  error
}

// SetUpCredentialPlugin builds the test plugin (once per test binary) and
// writes a bin directory and configuration for providers. Every provider
// counts its runs in the same Count file (a plugin run in the agent's Pod
// cannot reach it, and counts nothing).
func SetUpCredentialPlugin(t TB, providers ...PluginProvider) *CredentialPlugin {
	t.Helper()
	bin := buildCredentialPlugin(t)
	dir := shortDir(t, "cred")
	c := &CredentialPlugin{BinDir: filepath.Join(dir, "bin"), Config: filepath.Join(dir, "credential-providers.yaml"), Count: filepath.Join(dir, "runs")}
	if err := os.Mkdir(c.BinDir, 0o755); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n")
	for _, p := range providers {
		// A copy, not a link: the agent's Pod mounts the directory
		// alone, where a link to the build would point nowhere.
		copyFile(t, bin, filepath.Join(c.BinDir, p.Name), 0o755)
		fmt.Fprintf(&b, "  - name: %s\n    apiVersion: credentialprovider.kubelet.k8s.io/v1\n    defaultCacheDuration: %s\n    matchImages: %s\n",
			p.Name, p.CacheDuration, jsonList(p.MatchImages))
		fmt.Fprintf(&b, "    args: %s\n", jsonList(append([]string{"--count", c.Count}, p.Args...)))
		fmt.Fprintf(&b, "    env:\n      - {name: FAKE_USERNAME, value: %q}\n      - {name: FAKE_PASSWORD, value: %q}\n", p.Username, p.Password)
	}
	if err := os.WriteFile(c.Config, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return c
}

// copyFile copies src to dst with mode perm.
func copyFile(t TB, src, dst string, perm os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, perm); err != nil {
		t.Fatal(err)
	}
}

func jsonList(items []string) string {
	q := make([]string, len(items))
	for i, s := range items {
		q[i] = fmt.Sprintf("%q", s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

func buildCredentialPlugin(t TB) string {
	t.Helper()
	pluginBuild.once.Do(func() {
		dir, err := os.MkdirTemp("", "warmer-credplugin-")
		if err != nil {
			pluginBuild.err = err
			return
		}
		hostcheck.GuardDir(dir)
		pluginBuild.path = filepath.Join(dir, "fakeplugin")
		cmd := exec.Command("go", "build", "-o", pluginBuild.path, "./pkg/credprovider/testdata/fakeplugin")
		cmd.Dir = RepoRoot(t)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			pluginBuild.err = fmt.Errorf("building the credential plugin: %w\n%s", err, out)
		}
	})
	if pluginBuild.err != nil {
		t.Fatal(pluginBuild.err)
	}
	return pluginBuild.path
}
