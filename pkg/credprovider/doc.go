// Package credprovider runs the kubelet's credential-provider plugins for
// the agent, from the same configuration the kubelet reads: the file (or
// directory) of --image-credential-provider-config and the executables in
// --image-credential-provider-bin-dir.
//
// What it does the kubelet's way:
//
//   - the configuration is kubelet.config.k8s.io/v1 CredentialProviderConfig
//     (v1beta1 and v1alpha1 read the same), validated as the kubelet
//     validates it; a directory holds several such files, read in name
//     order;
//   - a plugin is run only for images one of its matchImages matches: host
//     labels compared one by one, each may be a glob ("*.azurecr.io",
//     "k8s.*.io", "app*.k8s.io"; one label per glob), the port equal, the
//     pattern's path a prefix of the image's;
//   - the plugin gets a CredentialProviderRequest (the image's repository,
//     without tag or digest) on stdin, with the configured args and env
//     over the agent's environment, and answers a CredentialProviderResponse
//     on stdout in the same apiVersion, within a minute;
//   - its answer is cached per cacheKeyType (Image, Registry or Global) for
//     its cacheDuration, or the provider's defaultCacheDuration when it
//     gives none; 0 means not cached;
//   - the answer's auth keys are matched against the image as pull secret
//     keys are (pullengine.Keyring), and providers' logins come in the
//     configuration's order, after the pull secrets' (the engine's side).
//
// What it does not: service-account-token providers (tokenAttributes) are
// not run. The agent pulls for no pod, so it has no service account to
// mint a token for; such a provider is left out and named in Skipped, and
// the images it serves are pulled with pull secrets only.
//
// Why not the kubelet's code: k8s.io/kubernetes/pkg/credentialprovider
// lives in the kubernetes module, which cannot be required as a library
// (its go.mod replaces the staging modules). The published API types of
// k8s.io/kubelet are used for the file and the wire format.
//
// Nothing here logs, returns or records a credential: errors name the
// provider and the kind of failure only, never the plugin's output.
package credprovider
