package credprovider

import "testing"

func TestPatternMatches(t *testing.T) {
	tests := []struct {
		pattern, image string
		want           bool
	}{
		{"123456789.dkr.ecr.us-east-1.amazonaws.com", "123456789.dkr.ecr.us-east-1.amazonaws.com/app", true},
		{"*.dkr.ecr.*.amazonaws.com", "123456789.dkr.ecr.eu-west-1.amazonaws.com/team/app", true},
		{"*.azurecr.io", "myregistry.azurecr.io/app", true},
		{"*.azurecr.io", "azurecr.io/app", false}, // a glob is one label, never none
		{"*.io", "a.azurecr.io/app", false},       // nor two
		{"k8s.*.io", "k8s.gcr.io/pause", true},
		{"app*.k8s.io", "apps.k8s.io/x", true},
		{"app*.k8s.io", "web.k8s.io/x", false},
		{"gcr.*", "gcr.io/project/app", true},
		{"gcr.io", "gcr.io/project/app", true},
		{"gcr.io", "us.gcr.io/project/app", false},
		{"GCR.io", "gcr.io/project/app", true}, // DNS names ignore case
		{"registry.io:8080/path", "registry.io:8080/path/app", true},
		{"registry.io:8080/path", "registry.io:8080/pathology/app", true}, // a plain prefix, as the kubelet's
		{"registry.io:8080/path", "registry.io:8080/other/app", false},
		{"registry.io:8080/path", "registry.io/path/app", false}, // port must be equal
		{"registry.io", "registry.io:8080/app", false},           // no port matches no port only
		{"registry.io:8080", "registry.io:9090/app", false},
		{"127.0.0.1:5000", "127.0.0.1:5000/private/app", true},
		{"*.0.0.1:5000", "127.0.0.1:5000/private/app", true},
		{"docker.io", "docker.io/library/nginx", true},
		{"docker.io/library", "docker.io/library/nginx", true},
		{"docker.io/team", "docker.io/library/nginx", false},
	}
	for _, tt := range tests {
		p, err := parsePattern(tt.pattern)
		if err != nil {
			t.Fatalf("parsePattern(%q): %v", tt.pattern, err)
		}
		if got := p.matches(tt.image); got != tt.want {
			t.Errorf("%q matches %q = %v; want %v", tt.pattern, tt.image, got, tt.want)
		}
	}
}

func TestParsePatternRefuses(t *testing.T) {
	for _, s := range []string{"", "reg istry.io", "[.io", "user:pw@registry.io", "registry.io/x?y=1", "registry.io:port"} {
		if _, err := parsePattern(s); err == nil {
			t.Errorf("parsePattern(%q) accepted; want an error", s)
		}
	}
}
