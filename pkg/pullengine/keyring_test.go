package pullengine

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"

	"github.com/warmer-dev/warmer/pkg/imageref"
)

// dockerConfigJSON builds kubernetes.io/dockerconfigjson content where each
// registry's username is the registry key itself, so tests can tell which
// entries matched.
func dockerConfigJSON(keys ...string) []byte {
	auths := map[string]map[string]string{}
	for _, k := range keys {
		auths[k] = map[string]string{"username": k, "password": "pw-" + k}
	}
	b, _ := json.Marshal(map[string]any{"auths": auths})
	return b
}

func users(creds []Credential) []string {
	out := []string{}
	for _, c := range creds {
		out = append(out, c.Username)
	}
	return out
}

func TestKeyringMatching(t *testing.T) {
	tests := []struct {
		name  string
		keys  []string
		image string
		want  []string
	}{
		{"exact host", []string{"registry.example.com"}, "registry.example.com/app:1", []string{"registry.example.com"}},
		{"host with scheme", []string{"https://registry.example.com"}, "registry.example.com/app", []string{"https://registry.example.com"}},
		{"other host", []string{"registry.example.com"}, "quay.io/app", nil},
		{"host case", []string{"Registry.Example.COM"}, "registry.example.com/app", []string{"Registry.Example.COM"}},
		{"port must match", []string{"127.0.0.1:35001"}, "127.0.0.1:35001/private/unique:v1", []string{"127.0.0.1:35001"}},
		{"key port, image none", []string{"registry.example.com:5000"}, "registry.example.com/app", nil},
		{"key no port, image port", []string{"registry.example.com"}, "registry.example.com:5000/app", nil},
		{"other port", []string{"127.0.0.1:35001"}, "127.0.0.1:35000/app", nil},
		{"glob one label", []string{"*.example.com"}, "a.example.com/app", []string{"*.example.com"}},
		{"glob not two labels", []string{"*.example.com"}, "a.b.example.com/app", nil},
		{"glob not zero labels", []string{"*.example.com"}, "example.com/app", nil},
		{"glob inside label", []string{"reg-*.example.com"}, "reg-eu.example.com/app", []string{"reg-*.example.com"}},
		{"glob with port", []string{"*.example.com:5000"}, "a.example.com:5000/app", []string{"*.example.com:5000"}},
		{"path prefix", []string{"registry.example.com/team"}, "registry.example.com/team/app", []string{"registry.example.com/team"}},
		{"path other", []string{"registry.example.com/team"}, "registry.example.com/other/app", nil},
		{"path string prefix like kubelet", []string{"registry.example.com/team"}, "registry.example.com/teams/app", []string{"registry.example.com/team"}},
		{"v1 prefix means host", []string{"https://registry.example.com/v1/"}, "registry.example.com/x/y", []string{"https://registry.example.com/v1/"}},
		{"v2 prefix stripped", []string{"registry.example.com/v2/team"}, "registry.example.com/team/app", []string{"registry.example.com/v2/team"}},
		{"docker hub index v1", []string{"https://index.docker.io/v1/"}, "nginx", []string{"https://index.docker.io/v1/"}},
		{"docker hub index", []string{"index.docker.io"}, "library/nginx:1", []string{"index.docker.io"}},
		{"docker hub registry-1", []string{"registry-1.docker.io"}, "docker.io/user/app", []string{"registry-1.docker.io"}},
		{"docker hub docker.io", []string{"docker.io"}, "user/app", []string{"docker.io"}},
		{"docker hub with path", []string{"docker.io/user"}, "user/app", []string{"docker.io/user"}},
		{"docker hub path other", []string{"docker.io/user"}, "other/app", nil},
		{"docker hub key, other registry", []string{"docker.io"}, "quay.io/user/app", nil},
		{"ipv6 port", []string{"[::1]:5000"}, "[::1]:5000/app", []string{"[::1]:5000"}},
		{"localhost", []string{"localhost:5000"}, "localhost:5000/app", []string{"localhost:5000"}},
		{
			"most specific first",
			[]string{"registry.example.com", "*.example.com", "registry.example.com/team", "registry.example.com/team/app", "*.example.com/team"},
			"registry.example.com/team/app:1",
			[]string{"registry.example.com/team/app", "registry.example.com/team", "*.example.com/team", "registry.example.com", "*.example.com"},
		},
		{"bad key skipped", []string{"bad key with space", "registry.example.com"}, "registry.example.com/app", []string{"registry.example.com"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := NewKeyring()
			_ = k.AddDockerConfigJSON(dockerConfigJSON(tt.keys...))
			got := users(k.Lookup(mustRef(t, tt.image)))
			want := tt.want
			if want == nil {
				want = []string{}
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("Lookup(%s) = %q, want %q", tt.image, got, want)
			}
		})
	}
}

func TestKeyringSecretsAndOrder(t *testing.T) {
	first := NewKeyring()
	if err := first.AddSecret(SecretTypeDockerConfigJSON, map[string][]byte{
		DockerConfigJSONKey: []byte(`{"auths":{"reg.local":{"username":"a","password":"1"}}}`),
	}); err != nil {
		t.Fatal(err)
	}
	second := NewKeyring()
	auth := base64.StdEncoding.EncodeToString([]byte("b:2:with-colon"))
	if err := second.AddSecret(SecretTypeDockercfg, map[string][]byte{
		DockercfgKey: []byte(`{"reg.local":{"auth":"` + auth + `","email":"x@y"}, "other.local":{"username":"a","password":"1"}}`),
	}); err != nil {
		t.Fatal(err)
	}
	dup := NewKeyring()
	_ = dup.Add(Credential{Registry: "reg.local", Username: "a", Password: "1"})

	got := MergeKeyrings(first, nil, second, dup).Lookup(mustRef(t, "reg.local/app"))
	want := []Credential{{"reg.local", "a", "1"}, {"reg.local", "b", "2:with-colon"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("merged lookup = %#v, want secret order kept and duplicates dropped", got)
	}
	if err := NewKeyring().AddSecret("Opaque", nil); !errors.Is(err, ErrMalformedDockerConfig) {
		t.Fatalf("Opaque secret: %v", err)
	}
}

func TestDockerConfigParsing(t *testing.T) {
	unpadded := base64.RawStdEncoding.EncodeToString([]byte("u:p1"))
	tests := []struct {
		name    string
		content string
		legacy  bool
		want    []string // usernames kept
		wantErr bool
	}{
		{"auth padded and user/pass", `{"auths":{"a.io":{"auth":"` + base64.StdEncoding.EncodeToString([]byte("u:p")) + `"},"b.io":{"username":"v","password":"q"}}}`, false, []string{"v", "u"}, false},
		{"auth unpadded", `{"auths":{"a.io":{"auth":"` + unpadded + `"}}}`, false, []string{"u"}, false},
		{"auth wins over user/pass", `{"auths":{"a.io":{"username":"x","password":"y","auth":"` + unpadded + `"}}}`, false, []string{"u"}, false},
		{"auth not base64", `{"auths":{"a.io":{"auth":"%%%"},"b.io":{"username":"v","password":"q"}}}`, false, []string{"v"}, true},
		{"auth without colon", `{"auths":{"a.io":{"auth":"` + base64.StdEncoding.EncodeToString([]byte("nocolon")) + `"}}}`, false, nil, true},
		{"empty entry skipped", `{"auths":{"a.io":{}}}`, false, nil, false},
		{"no auths", `{}`, false, nil, false},
		{"entry wrong type", `{"auths":{"a.io":{"password":12345678},"b.io":{"username":"v","password":"q"}}}`, false, []string{"v"}, true},
		{"not json", `{"auths":`, false, nil, true},
		{"legacy top-level", `{"a.io":{"username":"u","password":"p"}}`, true, []string{"u"}, false},
		{"legacy given auths wrapper", `{"auths":{"a.io":{"username":"u"}}}`, true, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := NewKeyring()
			var err error
			if tt.legacy {
				err = k.AddDockercfg([]byte(tt.content))
			} else {
				err = k.AddDockerConfigJSON([]byte(tt.content))
			}
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if err != nil && !errors.Is(err, ErrMalformedDockerConfig) {
				t.Fatalf("err %v does not wrap ErrMalformedDockerConfig", err)
			}
			var got []string
			for _, e := range k.entries {
				got = append(got, e.cred.Username)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("kept %q, want %q", got, tt.want)
			}
		})
	}
}

func TestCredentialsNeverPrinted(t *testing.T) {
	const secret = "s3cr3t-Pa55"
	c := Credential{Registry: "me:" + secret + "@reg.local", Username: "user-" + secret, Password: secret}
	k := NewKeyring()
	_ = k.Add(Credential{Registry: "reg.local", Username: "user-" + secret, Password: secret})
	var logged strings.Builder
	logger := funcr.New(func(prefix, args string) { logged.WriteString(args) }, funcr.Options{})
	logger.Info("x", "cred", c, "keyring", k, "ptr", &c, "list", []Credential{c})

	js, _ := json.Marshal(c)
	outputs := []string{
		c.String(), c.GoString(), k.String(), logged.String(), string(js),
		fmt.Sprintf("%v %+v %#v %s %q %x %v %#v %+v", c, c, c, c, c, c, &c, []Credential{c}, struct{ C Credential }{c}),
		fmt.Sprintf("%v %+v %#v %s", k, k, k, k),
	}
	for _, out := range outputs {
		if strings.Contains(out, secret) {
			t.Fatalf("secret printed: %s", out)
		}
	}
	if !strings.Contains(c.String(), "reg.local") {
		t.Fatalf("registry should stay visible: %s", c)
	}
}

func FuzzDockerConfig(f *testing.F) {
	f.Add([]byte(`{"auths":{"reg.local:5000":{"username":"u","password":"secretpw"}}}`), false)
	f.Add([]byte(`{"auths":{"*.example.com/team":{"auth":"dTpzZWNyZXRwdw=="}}}`), false)
	f.Add([]byte(`{"https://index.docker.io/v1/":{"auth":"dTpzZWNyZXRwdw"}}`), true)
	f.Add([]byte(`{"auths":{"a":{"auth":"%%%"}}}`), false)
	f.Add([]byte(`{"auths":{"u:pw@host":{"auth":"eDp5"}}}`), false)
	f.Fuzz(func(t *testing.T, data []byte, legacy bool) {
		k := NewKeyring()
		var err error
		if legacy {
			err = k.AddDockercfg(data)
		} else {
			err = k.AddDockerConfigJSON(data)
		}
		if err == nil {
			return
		}
		if !errors.Is(err, ErrMalformedDockerConfig) {
			t.Fatalf("error does not wrap ErrMalformedDockerConfig: %v", err)
		}
		for _, s := range secretsIn(data) {
			if strings.Contains(err.Error(), s) {
				t.Fatalf("error %q shows credential text %q", err, s)
			}
		}
	})
}

// secretsIn returns the password, auth and decoded password values found in
// docker config content (either format) that are long enough to be
// meaningful and do not also appear in a registry key, which errors may name.
func secretsIn(data []byte) []string {
	var doc map[string]json.RawMessage
	if json.Unmarshal(data, &doc) != nil {
		return nil
	}
	entries := map[string]json.RawMessage{}
	if raw, ok := doc["auths"]; ok {
		_ = json.Unmarshal(raw, &entries)
	}
	for k, v := range doc {
		entries[k] = v
	}
	var keys strings.Builder
	for k := range entries {
		keys.WriteString(k + "\n")
	}
	var out []string
	for _, raw := range entries {
		var e dockerConfigEntry
		if json.Unmarshal(raw, &e) != nil {
			continue
		}
		vals := []string{e.Password, e.Auth}
		if _, p, err := decodeAuth(e.Auth); err == nil {
			vals = append(vals, p)
		}
		for _, v := range vals {
			if len(v) >= 4 && !strings.Contains(keys.String(), v) && !strings.Contains("registry malformed docker config auth is not base64(username:password) invalid JSON at byte unexpected structure <redacted>", v) {
				out = append(out, v)
			}
		}
	}
	return out
}

func FuzzKeyringLookup(f *testing.F) {
	f.Add("*.example.com/team", "a.example.com/team/app:1")
	f.Add("https://index.docker.io/v1/", "nginx")
	f.Add("127.0.0.1:35001", "127.0.0.1:35001/private/unique:v1")
	f.Add("[::1]:5000/x", "[::1]:5000/x/y")
	f.Add("[a-", "a.io/b")
	f.Fuzz(func(t *testing.T, key, image string) {
		ref, err := imageref.Parse(image)
		if err != nil {
			return
		}
		k := NewKeyring()
		const secret = "fuzz-secret-value"
		kerr := k.Add(Credential{Registry: key, Username: "u", Password: secret})
		if kerr != nil && strings.Contains(kerr.Error(), secret) {
			t.Fatalf("error shows the password: %v", kerr)
		}
		got := k.Lookup(ref)
		if len(got) > 1 {
			t.Fatalf("one login, %d candidates", len(got))
		}
		if len(got) == 1 && got[0].Password != secret {
			t.Fatalf("candidate lost its password")
		}
		if strings.Contains(fmt.Sprintf("%v %#v", k, got), secret) {
			t.Fatalf("keyring printed a password")
		}
		// An exact key for the image's own registry must always match.
		exact := NewKeyring()
		_ = exact.Add(Credential{Registry: ref.Domain(), Username: "u", Password: "p"})
		if len(exact.Lookup(ref)) != 1 && !strings.Contains(ref.Domain(), "@") {
			t.Fatalf("key %q does not match its own image %q", ref.Domain(), ref)
		}
	})
}
