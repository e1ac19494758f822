package imageref

import (
	"fmt"

	"github.com/distribution/reference"
)

// DefaultTag is applied to references that carry neither tag nor digest, as
// the kubelet does.
const DefaultTag = "latest"

// Reference is an image reference normalised the kubelet's way: default
// registry (docker.io) and namespace (library/) filled in, ":latest" added
// when there is neither tag nor digest.
//
// A reference with both a tag and a digest ("nginx:1.27@sha256:...") is
// accepted and pulled by digest: the digest pins the content, the tag is
// kept only for display. Runtimes do the same.
type Reference struct {
	original string
	name     string
	tag      string
	digest   string
	key      string // String(), computed once: it is a hot map key
}

// Parse normalises image. It fails for anything the kubelet would
// refuse with InvalidImageName (empty, spaces, upper-case repository, short
// digest, a bare 64-hex ID, ...).
func Parse(image string) (Reference, error) {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return Reference{}, fmt.Errorf("invalid image reference %q: %w", image, err)
	}
	r := Reference{original: image, name: named.Name()}
	if t, ok := named.(reference.Tagged); ok {
		r.tag = t.Tag()
	}
	if d, ok := named.(reference.Digested); ok {
		r.digest = d.Digest().String()
	}
	if r.tag == "" && r.digest == "" {
		r.tag = DefaultTag
	}
	if r.digest != "" {
		r.key = r.name + "@" + r.digest
	} else {
		r.key = r.name + ":" + r.tag
	}
	return r, nil
}

// String is the fully-qualified reference to pull: name@digest when there is
// a digest, name:tag otherwise. It is also the engine's key for the image.
func (r Reference) String() string { return r.key }

// Original is the reference as it was requested.
func (r Reference) Original() string { return r.original }

// Name is the fully-qualified repository, e.g. "docker.io/library/nginx".
func (r Reference) Name() string { return r.name }

// Tag is the tag, "latest" by default; it may be set alongside a digest.
func (r Reference) Tag() string { return r.tag }

// Digest is the digest ("sha256:..."), or "".
func (r Reference) Digest() string { return r.digest }

// Domain is the registry host, with its port if any.
func (r Reference) Domain() string {
	d, _ := splitDomain(r.name)
	return d
}

// Path is the repository path within the registry, e.g. "library/nginx".
func (r Reference) Path() string {
	_, p := splitDomain(r.name)
	return p
}

// IsZero reports whether r is the zero Reference.
func (r Reference) IsZero() bool { return r.name == "" }

// splitDomain splits a normalised name at its first slash; normalised names
// always have a domain component.
func splitDomain(name string) (string, string) {
	for i := 0; i < len(name); i++ {
		if name[i] == '/' {
			return name[:i], name[i+1:]
		}
	}
	return name, ""
}
