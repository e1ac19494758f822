package imageref

import (
	"strings"
	"testing"
)

const digestA = "sha256:0000000000000000000000000000000000000000000000000000000000000001"

func TestParse(t *testing.T) {
	tests := []struct {
		in, want, tag, digest, domain string
	}{
		{"nginx", "docker.io/library/nginx:latest", "latest", "", "docker.io"},
		{"nginx:1.27", "docker.io/library/nginx:1.27", "1.27", "", "docker.io"},
		{"library/nginx", "docker.io/library/nginx:latest", "latest", "", "docker.io"},
		{"docker.io/library/nginx:latest", "docker.io/library/nginx:latest", "latest", "", "docker.io"},
		{"index.docker.io/library/nginx", "docker.io/library/nginx:latest", "latest", "", "docker.io"},
		{"user/app", "docker.io/user/app:latest", "latest", "", "docker.io"},
		{"127.0.0.1:35000/test/small:v1", "127.0.0.1:35000/test/small:v1", "v1", "", "127.0.0.1:35000"},
		{"localhost/app", "localhost/app:latest", "latest", "", "localhost"},
		{"quay.io/a/b@" + digestA, "quay.io/a/b@" + digestA, "", digestA, "quay.io"},
		// tag and digest: accepted, pulled by digest, tag kept for display.
		{"quay.io/a/b:v2@" + digestA, "quay.io/a/b@" + digestA, "v2", digestA, "quay.io"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			r, err := Parse(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if r.String() != tt.want || r.Tag() != tt.tag || r.Digest() != tt.digest || r.Domain() != tt.domain {
				t.Fatalf("got %q tag %q digest %q domain %q", r, r.Tag(), r.Digest(), r.Domain())
			}
			if r.Original() != tt.in {
				t.Fatalf("Original = %q", r.Original())
			}
		})
	}
}

func TestParseInvalid(t *testing.T) {
	for _, in := range []string{
		"", " ", "not a ref", "127.0.0.1:35000/Test/UPPER:v1", "127.0.0.1:35000/test/small@sha256:abc",
		"nginx:", ":tag", "a//b", strings.Repeat("a", 64), // a bare 64-hex ID
	} {
		if r, err := Parse(in); err == nil {
			t.Errorf("Parse(%q) = %q, want an error", in, r)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"nginx", "nginx:1.27", "docker.io/library/nginx:latest", "127.0.0.1:35000/test/small:v1",
		"quay.io/a/b:v2@" + digestA, "localhost:5000/x@" + digestA, "not a ref", "[::1]:5000/a/b:c",
		"UPPER/case", "a/b/c/d/e:f", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		r, err := Parse(in)
		if err != nil {
			return
		}
		again, err := Parse(r.String())
		if err != nil {
			t.Fatalf("normalised %q does not re-parse: %v", r, err)
		}
		if again.String() != r.String() {
			t.Fatalf("not idempotent: %q -> %q -> %q", in, r, again)
		}
		if r.Tag() == "" && r.Digest() == "" {
			t.Fatalf("%q: neither tag nor digest after normalisation", in)
		}
		if r.Domain()+"/"+r.Path() != r.Name() {
			t.Fatalf("%q: domain %q and path %q do not rebuild %q", in, r.Domain(), r.Path(), r.Name())
		}
	})
}
