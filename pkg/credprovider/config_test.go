package credprovider

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

const goodProvider = `
  - name: ecr-fake
    matchImages: ["*.dkr.ecr.*.amazonaws.com", "registry.example.com:5000/team"]
    defaultCacheDuration: 12h
    apiVersion: credentialprovider.kubelet.k8s.io/v1
    args: ["get-credentials"]
    env:
      - name: AWS_PROFILE
        value: nodes
`

func TestLoadConfig(t *testing.T) {
	header := "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n"
	tests := []struct {
		name    string
		content string
		wantErr string // "" means valid
	}{
		{"valid", header + goodProvider, ""},
		{"v1beta1 file", strings.Replace(header, "/v1\n", "/v1beta1\n", 1) + goodProvider, ""},
		{"json", `{"apiVersion":"kubelet.config.k8s.io/v1","kind":"CredentialProviderConfig","providers":[{"name":"a","matchImages":["gcr.io"],"defaultCacheDuration":"0s","apiVersion":"credentialprovider.kubelet.k8s.io/v1"}]}`, ""},
		{"wrong kind", strings.Replace(header, "CredentialProviderConfig", "KubeletConfiguration", 1) + goodProvider, `kind is "KubeletConfiguration"`},
		{"wrong apiVersion", strings.Replace(header, "kubelet.config.k8s.io/v1", "v1", 1) + goodProvider, `apiVersion "v1" is not one of`},
		{"not yaml", "providers: [", "credential provider config"},
		{"no providers", header, "at least one provider"},
		{"name with slash", header + strings.Replace(goodProvider, "ecr-fake", "../bin/sh", 1), "must be a file name"},
		{"name with space", header + strings.Replace(goodProvider, "ecr-fake", "ecr fake", 1), "must be a file name"},
		{"name dot-dot", header + strings.Replace(goodProvider, "ecr-fake", "..", 1), "must be a file name"},
		{"no name", header + strings.Replace(goodProvider, "name: ecr-fake", "name: ''", 1), "providers[0].name: required"},
		{"duplicate", header + goodProvider + goodProvider, `providers[1].name: "ecr-fake" is a duplicate`},
		{"plugin apiVersion", header + strings.Replace(goodProvider, "credentialprovider.kubelet.k8s.io/v1", "credentialprovider.kubelet.k8s.io/v2", 1), `apiVersion: "credentialprovider.kubelet.k8s.io/v2" is not one of`},
		{"no plugin apiVersion", header + strings.Replace(goodProvider, "apiVersion: credentialprovider.kubelet.k8s.io/v1", "", 1), `apiVersion: "" is not one of`},
		{"no matchImages", header + strings.Replace(goodProvider, `matchImages: ["*.dkr.ecr.*.amazonaws.com", "registry.example.com:5000/team"]`, "", 1), "matchImages: at least one"},
		{"bad matchImage", header + strings.Replace(goodProvider, `"registry.example.com:5000/team"`, `"reg istry.example.com"`, 1), "matchImages"},
		{"bad glob", header + strings.Replace(goodProvider, `"registry.example.com:5000/team"`, `"[.example.com"`, 1), "matchImages"},
		{"no defaultCacheDuration", header + strings.Replace(goodProvider, "defaultCacheDuration: 12h", "", 1), "defaultCacheDuration: required"},
		{"negative defaultCacheDuration", header + strings.Replace(goodProvider, "defaultCacheDuration: 12h", "defaultCacheDuration: -1m", 1), "must be 0 or more"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeFile(t, t.TempDir(), "config.yaml", tt.content)
			cfg, err := LoadConfig(path)
			if tt.wantErr == "" {
				if err != nil || len(cfg.Providers) == 0 {
					t.Fatalf("LoadConfig = %v, %v; want a valid config", cfg, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("LoadConfig error = %v; want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestLoadConfigDirectory(t *testing.T) {
	dir := t.TempDir()
	header := "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n"
	writeFile(t, dir, "20-b.yaml", header+strings.Replace(goodProvider, "ecr-fake", "b", 1))
	writeFile(t, dir, "10-a.json", `{"apiVersion":"kubelet.config.k8s.io/v1","kind":"CredentialProviderConfig","providers":[{"name":"a","matchImages":["gcr.io"],"defaultCacheDuration":"1m","apiVersion":"credentialprovider.kubelet.k8s.io/v1"}]}`)
	writeFile(t, dir, "README.md", "not a config")
	cfg, err := LoadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Providers) != 2 || cfg.Providers[0].Name != "a" || cfg.Providers[1].Name != "b" {
		t.Fatalf("providers = %+v; want a (10-a.json) then b (20-b.yaml)", cfg.Providers)
	}
	writeFile(t, dir, "30-dup.yml", header+strings.Replace(goodProvider, "ecr-fake", "a", 1))
	if _, err := LoadConfig(dir); err == nil || !strings.Contains(err.Error(), `"a" is a duplicate`) {
		t.Fatalf("a name in two files: error %v; want a duplicate", err)
	}
	if _, err := LoadConfig(t.TempDir()); err == nil {
		t.Fatal("an empty directory loaded; want an error")
	}
	if _, err := LoadConfig(filepath.Join(dir, "missing.yaml")); err == nil {
		t.Fatal("a missing file loaded; want an error")
	}
}
