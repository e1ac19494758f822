package main

import (
	"fmt"

	"github.com/spf13/pflag"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/warmer-dev/warmer/pkg/credprovider"
)

// credentialProviderFlags point the agent at the kubelet's
// credential-provider plugins, under the kubelet's flag names, so that the
// agent is given the same file and directory as the kubelet.
type credentialProviderFlags struct {
	config string
	binDir string
	// loaded are the providers load readied; nil without a config.
	loaded *credprovider.Providers
}

func (c *credentialProviderFlags) bind(fs *pflag.FlagSet) {
	fs.StringVar(&c.config, "image-credential-provider-config", "", "The kubelet's CredentialProviderConfig file (or directory of them): the agent runs the same plugins for its pulls, after the ImageWarm's imagePullSecrets. Empty: no plugins.")
	fs.StringVar(&c.binDir, "image-credential-provider-bin-dir", "", "Directory holding the credential-provider plugins' executables, as the kubelet's flag of that name.")
}

func (c *credentialProviderFlags) validate() error {
	if (c.config == "") != (c.binDir == "") {
		return usagef("--image-credential-provider-config and --image-credential-provider-bin-dir go together")
	}
	return nil
}

// load reads the plugins' configuration, when one is set. A
// configuration the kubelet would refuse stops the agent at start, as it
// stops the kubelet.
func (c *credentialProviderFlags) load() error {
	if c.config == "" {
		return nil
	}
	cfg, err := credprovider.LoadConfig(c.config)
	if err != nil {
		return usageError{fmt.Errorf("--image-credential-provider-config: %w", err)}
	}
	ps, err := credprovider.New(cfg, credprovider.Options{BinDir: c.binDir, Registerer: ctrlmetrics.Registry})
	if err != nil {
		return usageError{fmt.Errorf("--image-credential-provider-bin-dir: %w", err)}
	}
	c.loaded = ps
	return nil
}

// logProviders says which plugins run and which do not, and why.
func (c *credentialProviderFlags) logProviders() {
	if c.loaded == nil {
		return
	}
	for _, s := range c.loaded.Skipped() {
		ctrl.Log.Info("Credential provider not run", "provider", s.Name, "reason", s.Reason)
	}
	ctrl.Log.Info("Running credential providers", "providers", c.loaded.Names())
}
