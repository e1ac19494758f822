package pullengine

import (
	"strings"

	"github.com/distribution/reference"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/warmer-dev/warmer/pkg/imageref"
)

// Presence indexes one ListImages answer by fully-qualified repo tag and
// repo digest, so that each lookup is a map access however many images the
// node holds. Build one per pass; it is read-only afterwards.
type Presence struct {
	byRef  map[string]*runtimeapi.Image
	images int
}

// NewPresence indexes images. Names runtimes report already qualified (as
// containerd and CRI-O do) are indexed as they are; others ("nginx:latest"
// from older shims) are normalised first. Unparsable names are skipped.
func NewPresence(images []*runtimeapi.Image) *Presence {
	p := &Presence{byRef: make(map[string]*runtimeapi.Image, 2*len(images)), images: len(images)}
	for _, img := range images {
		for _, t := range img.GetRepoTags() {
			if k, ok := canonical(t); ok {
				p.byRef[k] = img
			}
		}
		for _, d := range img.GetRepoDigests() {
			if k, ok := canonical(d); ok {
				p.byRef[k] = img
			}
		}
	}
	return p
}

// Len is the number of images indexed.
func (p *Presence) Len() int { return p.images }

// Lookup finds ref: by digest when it has one (a tag alongside is ignored,
// as for pulling), by tag otherwise.
func (p *Presence) Lookup(ref imageref.Reference) (PresentImage, bool) {
	img, ok := p.byRef[ref.String()]
	if !ok {
		return PresentImage{}, false
	}
	return PresentImage{
		ID:         img.GetId(),
		RepoDigest: repoDigestFor(img, ref.Name()),
		Size:       img.GetSize(),
		Pinned:     img.GetPinned(),
	}, true
}

// repoDigestFor picks, among img's repo digests, the one of repository name.
func repoDigestFor(img *runtimeapi.Image, name string) string {
	for _, d := range img.GetRepoDigests() {
		if k, ok := canonical(d); ok && len(k) > len(name) && k[len(name)] == '@' && k[:len(name)] == name {
			return k
		}
	}
	return ""
}

// canonical returns the normalised form of a repo tag or repo digest,
// skipping the parser when s is visibly qualified already: the index is
// rebuilt every pass over thousands of names.
func canonical(s string) (string, bool) {
	if isQualified(s) {
		return s, true
	}
	named, err := reference.ParseNormalizedNamed(s)
	if err != nil {
		return "", false
	}
	if d, ok := named.(reference.Digested); ok {
		return named.Name() + "@" + d.Digest().String(), true
	}
	if t, ok := named.(reference.Tagged); ok {
		return named.Name() + ":" + t.Tag(), true
	}
	return "", false
}

// isQualified reports whether s already has the normalised shape
// "domain/path:tag" or "domain/path@digest", with a domain normalisation
// would keep. Anything doubtful goes through the parser.
func isQualified(s string) bool {
	domain, rest, ok := strings.Cut(s, "/")
	if !ok || strings.ContainsAny(rest, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") {
		return false
	}
	switch {
	case domain == "index.docker.io":
		return false
	case domain == "docker.io" && !strings.Contains(rest, "/"): // lacks library/
		return false
	case domain != "localhost" && !strings.ContainsAny(domain, ".:"):
		return false
	}
	last := rest[strings.LastIndexByte(rest, '/')+1:]
	if name, _, digested := strings.Cut(last, "@"); digested {
		return name != "" && !strings.Contains(name, ":") // no tag beside the digest
	}
	return strings.Contains(last, ":")
}
