package credprovider

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	kubeletv1 "k8s.io/kubelet/config/v1"
	credv1 "k8s.io/kubelet/pkg/apis/credentialprovider/v1"
	"sigs.k8s.io/yaml"
)

// configKind is the kind a configuration file must declare.
const configKind = "CredentialProviderConfig"

// configVersions are the apiVersions the kubelet reads a configuration in;
// their CredentialProviderConfig fields are the same.
var configVersions = []string{
	kubeletv1.SchemeGroupVersion.String(),
	"kubelet.config.k8s.io/v1beta1",
	"kubelet.config.k8s.io/v1alpha1",
}

// pluginVersions are the CredentialProviderRequest/Response apiVersions a
// provider may use; their fields are the same as v1's.
var pluginVersions = []string{
	credv1.SchemeGroupVersion.String(),
	"credentialprovider.kubelet.k8s.io/v1beta1",
	"credentialprovider.kubelet.k8s.io/v1alpha1",
}

// LoadConfig reads a CredentialProviderConfig from path, a file or a
// directory of .json, .yaml and .yml files (read in name order, their
// providers appended), and validates it as the kubelet does.
func LoadConfig(path string) (*kubeletv1.CredentialProviderConfig, error) {
	if path == "" {
		return nil, errors.New("credential provider config path is empty")
	}
	files, err := configFiles(path)
	if err != nil {
		return nil, err
	}
	out := &kubeletv1.CredentialProviderConfig{}
	for _, f := range files {
		cfg, err := readConfigFile(f)
		if err != nil {
			return nil, err
		}
		out.Providers = append(out.Providers, cfg.Providers...)
	}
	if err := Validate(out); err != nil {
		return nil, fmt.Errorf("credential provider config %s: %w", path, err)
	}
	return out, nil
}

func configFiles(path string) ([]string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("reading credential provider config: %w", err)
	}
	if !info.IsDir() {
		return []string{path}, nil
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, fmt.Errorf("reading credential provider config directory: %w", err)
	}
	var files []string
	for _, e := range entries {
		switch filepath.Ext(e.Name()) {
		case ".json", ".yaml", ".yml":
			if !e.IsDir() {
				files = append(files, filepath.Join(path, e.Name()))
			}
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("credential provider config directory %s holds no .json, .yaml or .yml file", path)
	}
	slices.Sort(files)
	return files, nil
}

func readConfigFile(path string) (*kubeletv1.CredentialProviderConfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading credential provider config: %w", err)
	}
	var cfg kubeletv1.CredentialProviderConfig
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		return nil, fmt.Errorf("credential provider config %s: %w", path, err)
	}
	if cfg.Kind != configKind {
		return nil, fmt.Errorf("credential provider config %s: kind is %q, want %s", path, cfg.Kind, configKind)
	}
	if !slices.Contains(configVersions, cfg.APIVersion) {
		return nil, fmt.Errorf("credential provider config %s: apiVersion %q is not one of %s", path, cfg.APIVersion, strings.Join(configVersions, ", "))
	}
	return &cfg, nil
}

// Validate checks a configuration by the kubelet's rules: at least one
// provider; each with a unique name usable as a file name in the bin
// directory, a supported apiVersion, at least one valid matchImages
// pattern and a defaultCacheDuration of 0 or more. Every problem is
// reported, each naming its provider and field.
func Validate(cfg *kubeletv1.CredentialProviderConfig) error {
	if len(cfg.Providers) == 0 {
		return errors.New("providers: at least one provider is required")
	}
	var errs []error
	seen := map[string]bool{}
	for i, p := range cfg.Providers {
		field := fmt.Sprintf("providers[%d]", i)
		bad := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf(field+"."+format, args...))
		}
		switch {
		case p.Name == "":
			bad("name: required")
		case strings.ContainsAny(p.Name, "/ ") || p.Name == "." || p.Name == "..":
			bad("name: %q must be a file name in the bin directory (no '/', no spaces, not '.' or '..')", p.Name)
		case seen[p.Name]:
			bad("name: %q is a duplicate", p.Name)
		}
		seen[p.Name] = true
		if !slices.Contains(pluginVersions, p.APIVersion) {
			bad("apiVersion: %q is not one of %s", p.APIVersion, strings.Join(pluginVersions, ", "))
		}
		if len(p.MatchImages) == 0 {
			bad("matchImages: at least one pattern is required")
		}
		for _, m := range p.MatchImages {
			if _, err := parsePattern(m); err != nil {
				bad("matchImages: %w", err)
			}
		}
		switch {
		case p.DefaultCacheDuration == nil:
			bad("defaultCacheDuration: required")
		case p.DefaultCacheDuration.Duration < 0:
			bad("defaultCacheDuration: must be 0 or more, got %s", p.DefaultCacheDuration.Duration)
		}
	}
	return errors.Join(errs...)
}
