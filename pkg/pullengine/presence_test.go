package pullengine

import (
	"fmt"
	"testing"

	"github.com/distribution/reference"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/warmer-dev/warmer/pkg/imageref"
)

func mustRef(t testing.TB, s string) imageref.Reference {
	t.Helper()
	r, err := imageref.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestPresenceLookup(t *testing.T) {
	small := &runtimeapi.Image{
		Id:          "sha256:e3aa",
		RepoTags:    []string{"127.0.0.1:35000/test/small:v1"},
		RepoDigests: []string{"127.0.0.1:35000/test/small@" + digestA},
		Size:        3147322,
	}
	nginx := &runtimeapi.Image{
		Id:          "sha256:ng",
		RepoTags:    []string{"docker.io/library/nginx:latest", "docker.io/library/nginx:1.27", "mirror.local/nginx:1.27"},
		RepoDigests: []string{"docker.io/library/nginx@sha256:" + fmt.Sprintf("%064d", 2), "mirror.local/nginx@sha256:" + fmt.Sprintf("%064d", 3)},
		Pinned:      true,
	}
	shim := &runtimeapi.Image{Id: "sha256:old", RepoTags: []string{"busybox:1.36", "<none>:<none>"}}
	p := NewPresence([]*runtimeapi.Image{small, nginx, shim})

	tests := []struct {
		ref, wantID, wantDigest string
	}{
		{"127.0.0.1:35000/test/small:v1", "sha256:e3aa", "127.0.0.1:35000/test/small@" + digestA},
		{"127.0.0.1:35000/test/small@" + digestA, "sha256:e3aa", "127.0.0.1:35000/test/small@" + digestA},
		{"127.0.0.1:35000/test/small:other@" + digestA, "sha256:e3aa", "127.0.0.1:35000/test/small@" + digestA},
		{"nginx", "sha256:ng", "docker.io/library/nginx@sha256:" + fmt.Sprintf("%064d", 2)},
		{"docker.io/library/nginx:1.27", "sha256:ng", "docker.io/library/nginx@sha256:" + fmt.Sprintf("%064d", 2)},
		{"mirror.local/nginx:1.27", "sha256:ng", "mirror.local/nginx@sha256:" + fmt.Sprintf("%064d", 3)},
		{"busybox:1.36", "sha256:old", ""},
		{"127.0.0.1:35000/test/small:v2", "", ""},
		{"nginx:1.26", "", ""},
		{"127.0.0.1:35001/test/small:v1", "", ""}, // another registry
		{"docker.io/library/small:v1", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.ref, func(t *testing.T) {
			got, ok := p.Lookup(mustRef(t, tt.ref))
			if ok != (tt.wantID != "") || got.ID != tt.wantID || got.RepoDigest != tt.wantDigest {
				t.Fatalf("Lookup = %+v, %v; want ID %q digest %q", got, ok, tt.wantID, tt.wantDigest)
			}
		})
	}
	if got, _ := p.Lookup(mustRef(t, "nginx")); !got.Pinned {
		t.Error("pinned not reported")
	}
	if p.Len() != 3 {
		t.Errorf("Len = %d", p.Len())
	}
}

func TestCanonicalFastPathAgreesWithParser(t *testing.T) {
	for _, s := range []string{
		"docker.io/library/nginx:latest", "docker.io/nginx:latest", "index.docker.io/library/nginx:1",
		"127.0.0.1:35000/test/small:v1", "localhost/app:1", "localhost:5000/app@" + digestA,
		"quay.io/a/b:v2@" + digestA, "quay.io/a/b", "Quay.io/a/b:v1", "quay.io/a/B:v1", "nginx:1",
		"registry.local/app:V1", "a.b/c:d:e",
	} {
		checkCanonical(t, s)
	}
}

func checkCanonical(t *testing.T, s string) {
	t.Helper()
	got, ok := canonical(s)
	named, err := reference.ParseNormalizedNamed(s)
	if err != nil {
		if ok && isQualified(s) {
			// The fast path may index junk; it must just never match a
			// normalised reference.
			if _, perr := imageref.Parse(got); perr == nil {
				t.Fatalf("canonical(%q) = %q indexes an unparsable name under a valid key", s, got)
			}
		}
		return
	}
	want := ""
	if d, isD := named.(reference.Digested); isD {
		want = named.Name() + "@" + d.Digest().String()
	} else if tg, isT := named.(reference.Tagged); isT {
		want = named.Name() + ":" + tg.Tag()
	}
	if want != "" && (!ok || got != want) {
		t.Fatalf("canonical(%q) = %q, %v; parser says %q", s, got, ok, want)
	}
}

func FuzzCanonical(f *testing.F) {
	f.Add("docker.io/library/nginx:latest")
	f.Add("quay.io/a/b:v2@" + digestA)
	f.Add("localhost:5000/app@" + digestA)
	f.Fuzz(func(t *testing.T, s string) { checkCanonical(t, s) })
}

// benchImages makes n images shaped like containerd's answer.
func benchImages(n int) []*runtimeapi.Image {
	imgs := make([]*runtimeapi.Image, n)
	for i := range imgs {
		repo := fmt.Sprintf("registry.example.com:5000/team%d/app%d", i%50, i)
		imgs[i] = &runtimeapi.Image{
			Id:          fmt.Sprintf("sha256:%064x", i),
			RepoTags:    []string{repo + ":v1", repo + ":latest"},
			RepoDigests: []string{fmt.Sprintf("%s@sha256:%064x", repo, i+1)},
			Size:        uint64(i) << 20,
		}
	}
	return imgs
}

func BenchmarkPresence2000(b *testing.B) {
	imgs := benchImages(2000)
	refs := make([]imageref.Reference, len(imgs))
	for i := range refs {
		refs[i] = mustRef(b, fmt.Sprintf("registry.example.com:5000/team%d/app%d:v1", i%50, i))
	}
	b.ReportAllocs()
	for b.Loop() {
		p := NewPresence(imgs)
		for _, r := range refs {
			if _, ok := p.Lookup(r); !ok {
				b.Fatal("missing")
			}
		}
	}
}
