package v1alpha1

// ImageReference's grammar is split into rules so that a refusal says in
// words which part is wrong, rather than quoting one long pattern; together
// they accept exactly what that pattern did (language_test.go holds them to
// it). The rules after the first two judge only references of allowed
// characters without a scheme, and the last three only references whose
// slashes are sound, so that one mistake draws one message, not several.

// ImageReference is a container image reference as a Pod's image field takes
// it: [registry[:port]/]repository[:tag][@digest]. A reference with neither tag
// nor digest means ":latest"; one with both is pulled by its digest.
//
// The rules accept the distribution reference grammar, with one
// strictness the grammar leaves to a later parse step: the first path
// component only counts as a registry host when it has a dot or a port or is
// "localhost", so "Library/nginx" is rejected here for its upper-case
// repository instead of failing on every node. Digests are sha256, sha384 or
// sha512 with lower-case hex of the right length.
//
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=512
// +kubebuilder:validation:XValidation:rule="self.matches('^[]A-Za-z0-9._:/@[-]*$')",message="an image reference holds only ASCII letters, digits and . _ - : / @ (and [ ] around an IPv6 registry address): remove spaces, line breaks and other characters"
// +kubebuilder:validation:XValidation:rule="!self.matches('^[]A-Za-z0-9._:/@[-]*$') || !self.contains('://')",message="an image reference has no scheme: write registry.example/app, not https://registry.example/app"
// +kubebuilder:validation:XValidation:rule="!self.matches('^[]A-Za-z0-9._:/@[-]*$') || self.contains('://') || self.matches('^[^@]*(@(sha256:[a-f0-9]{64}|sha384:[a-f0-9]{96}|sha512:[a-f0-9]{128}))?$')",message="the digest, after @, must be sha256: and 64, sha384: and 96, or sha512: and 128 lower-case hex digits, and end the reference"
// +kubebuilder:validation:XValidation:rule="!self.matches('^[]A-Za-z0-9._:/@[-]*$') || self.contains('://') || self.matches('^([^@]*/)?[^/:@]*(:[a-zA-Z0-9_][a-zA-Z0-9_.-]{0,127})?(@.*)?$')",message="the tag, after the last :, must be 1 to 128 letters, digits, _ . or -, and start with a letter, digit or _"
// +kubebuilder:validation:XValidation:rule="!self.matches('^[]A-Za-z0-9._:/@[-]*$') || self.contains('://') || !self.matches('^[:@]')",message="an image reference starts with the repository name, such as nginx or registry.example/team/app: a tag (:v1) or a digest (@sha256:...) alone is not enough"
// +kubebuilder:validation:XValidation:rule="!self.matches('^[]A-Za-z0-9._:/@[-]*$') || self.contains('://') || !self.matches('^/|//|/$|/[:@]')",message="the parts of the repository name are separated by single slashes, with none at its start or end"
// +kubebuilder:validation:XValidation:rule="!self.matches('^[]A-Za-z0-9._:/@[-]*$') || self.contains('://') || self.matches('^$|^[:@/]|//|/$|/[:@]') || !self.matches('^[^/]*[.:[][^/]*/') || self.matches('^((localhost|[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?([.][a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?)+|[[][a-fA-F0-9:]+[]])(:[0-9]+)?|[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?:[0-9]+)/') || self.matches('^[a-z0-9]+(([._]|__|-+)[a-z0-9]+)*/')",message="the registry host, before the first /, must be a DNS name (letters, digits, - and .), localhost or an [IPv6] address, with an optional port of digits after a : (a tag, after the last :, cannot contain /)"
// +kubebuilder:validation:XValidation:rule="!self.matches('^[]A-Za-z0-9._:/@[-]*$') || self.contains('://') || self.matches('^$|^[:@/]|//|/$|/[:@]') || self.matches('^([^/]*[.:[][^/]*/|localhost/)?[^A-Z@]*(:[^/@]*)?(@.*)?$')",message="repository names are lower case: only the registry host and the tag may have capitals"
// +kubebuilder:validation:XValidation:rule="!self.matches('^[]A-Za-z0-9._:/@[-]*$') || self.contains('://') || self.matches('^$|^[:@/]|//|/$|/[:@]') || self.matches('^([^/]*[.:[][^/]*/|localhost/)?[a-zA-Z0-9]+(([._]|__|-+)[a-zA-Z0-9]+)*(/[a-zA-Z0-9]+(([._]|__|-+)[a-zA-Z0-9]+)*)*(:[^/@]*)?(@.*)?$')",message="each part of the repository name is letters and digits joined by one ., one or two _, or dashes: it starts and ends with a letter or digit (not a..b, a___b, -app or app-)"
// +kubebuilder:validation:XValidation:rule="self.matches('^$|^@') || self.matches('^[^@]{1,255}(:[A-Za-z0-9_][A-Za-z0-9_.-]*)?(@.+)?$')",message="the repository name, registry included and tag and digest excluded, must be at most 255 characters"
type ImageReference string

// SecretReference names a Secret in the ImageWarm's own namespace. Secrets in
// other namespaces cannot be named: whoever may create an ImageWarm in a
// namespace must not be able to make agents use another namespace's secrets.
type SecretReference struct {
	// name of a Secret of type kubernetes.io/dockerconfigjson or
	// kubernetes.io/dockercfg in the ImageWarm's namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="!self.contains('/')",message="only Secrets in the ImageWarm's own namespace can be used: write the Secret's name alone, without a namespace/"
	// +kubebuilder:validation:XValidation:rule="size(self) == 0 || size(self) > 253 || self.contains('/') || self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="a Secret's name is lower-case letters, digits, - and ., starting and ending with a letter or digit"
	Name string `json:"name"`
}
