package credprovider

import "fmt"

// Kind classifies a provider's failure.
type Kind string

// Kinds of failure.
const (
	// KindExec: the plugin could not be started or exited non-zero.
	KindExec Kind = "PluginFailed"
	// KindTimeout: the plugin did not answer within the timeout.
	KindTimeout Kind = "PluginTimeout"
	// KindBadResponse: the plugin's stdout is not a usable
	// CredentialProviderResponse (not JSON, another apiVersion or kind,
	// an unknown cacheKeyType, a negative cacheDuration, too large).
	KindBadResponse Kind = "PluginBadResponse"
)

// Error is one provider's failure. Its text names the provider, the kind
// and what went wrong in general terms; never the plugin's output, which
// may hold credentials.
type Error struct {
	// Provider is the provider's name from the configuration.
	Provider string
	// Kind classifies the failure.
	Kind Kind
	// Detail says what went wrong, e.g. "exit status 1".
	Detail string
}

func (e *Error) Error() string {
	return fmt.Sprintf("credential provider %q: %s: %s", e.Provider, e.Kind, e.Detail)
}
