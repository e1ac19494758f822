package v1alpha1

// ImageReference is a container image reference as a Pod's image field takes
// it: [registry[:port]/]repository[:tag][@digest]. A reference with neither tag
// nor digest means ":latest"; one with both is pulled by its digest.
//
// The pattern follows the distribution reference grammar, with one
// strictness the grammar leaves to a later parse step: the first path
// component only counts as a registry host when it has a dot or a port or is
// "localhost", so "Library/nginx" is rejected here for its upper-case
// repository instead of failing on every node. Digests are sha256, sha384 or
// sha512 with lower-case hex of the right length.
//
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=512
// +kubebuilder:validation:Pattern=`^(?:(?:(?:localhost|(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])(?:\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))+|\[[a-fA-F0-9:]+\])(?::[0-9]+)?|(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]):[0-9]+)/)?[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*(?::[a-zA-Z0-9_][a-zA-Z0-9_.-]{0,127})?(?:@(?:sha256:[a-f0-9]{64}|sha384:[a-f0-9]{96}|sha512:[a-f0-9]{128}))?$`
// +kubebuilder:validation:XValidation:rule="self.matches('^[^@]{1,255}(:[A-Za-z0-9_][A-Za-z0-9_.-]*)?(@.+)?$')",message="the repository name, registry included and tag and digest excluded, must be at most 255 characters"
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
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`
}
