package credbundle

import (
	"bytes"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func mustKey(t *testing.T) *KeyPair {
	t.Helper()
	k, err := NewKeyPair()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func sample() *Bundle {
	var b Bundle
	b.Put(types.NamespacedName{Namespace: "team-a", Name: "regcred"}, EntryOf(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "regcred"},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"r":{"auth":"c2VjcmV0"}}}`), "notes": []byte("x")},
	}))
	b.Put(types.NamespacedName{Namespace: "team-b", Name: "regcred"}, Problem("not opted in"))
	return &b
}

func TestSealOpen(t *testing.T) {
	a, b := mustKey(t), mustKey(t)
	sealed, err := Seal("node-a", a.Public(), sample())
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed, []byte("c2VjcmV0")) || bytes.Contains(sealed, []byte("not opted in")) {
		t.Fatal("the sealed bundle shows its content")
	}
	t.Run("round trip", func(t *testing.T) {
		got, err := a.Open("node-a", sealed)
		if err != nil {
			t.Fatal(err)
		}
		e, ok := got.Entry(types.NamespacedName{Namespace: "team-a", Name: "regcred"})
		if !ok || e.Type != corev1.SecretTypeDockerConfigJson || len(e.Data) != 1 || string(e.Data[corev1.DockerConfigJsonKey]) == "" {
			t.Errorf("team-a/regcred: %v %v; want only its .dockerconfigjson", ok, e.Type)
		}
		if e, _ := got.Entry(types.NamespacedName{Namespace: "team-b", Name: "regcred"}); e.Problem != "not opted in" {
			t.Errorf("team-b/regcred problem %q", e.Problem)
		}
	})
	t.Run("another node's key does not open it", func(t *testing.T) {
		if _, err := b.Open("node-a", sealed); !errors.Is(err, ErrNotOpened) {
			t.Errorf("open with B's key: %v; want ErrNotOpened", err)
		}
	})
	t.Run("under another node's name it does not open", func(t *testing.T) {
		if _, err := a.Open("node-b", sealed); !errors.Is(err, ErrNotOpened) {
			t.Errorf("open as node-b: %v; want ErrNotOpened", err)
		}
	})
	t.Run("tampered, it does not open", func(t *testing.T) {
		for _, i := range []int{0, 31, 40, len(sealed) - 1} {
			bad := bytes.Clone(sealed)
			bad[i] ^= 1
			if _, err := a.Open("node-a", bad); !errors.Is(err, ErrNotOpened) {
				t.Errorf("byte %d flipped: %v; want ErrNotOpened", i, err)
			}
		}
		if _, err := a.Open("node-a", sealed[:len(sealed)-1]); !errors.Is(err, ErrNotOpened) {
			t.Errorf("truncated: %v; want ErrNotOpened", err)
		}
	})
	t.Run("sealed for node B to A's key, it does not open as A", func(t *testing.T) {
		other, err := Seal("node-b", a.Public(), sample())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.Open("node-a", other); !errors.Is(err, ErrNotOpened) {
			t.Errorf("node-b's bundle opened as node-a: %v", err)
		}
	})
}

func TestSealRefusesBadKeys(t *testing.T) {
	pub := mustKey(t).Public()
	bad := pub
	bad.KEM = 16
	if _, err := Seal("n", bad, sample()); err == nil {
		t.Error("sealed to a P-256 KEM id")
	}
	bad = pub
	bad.PublicKey = bad.PublicKey[:31]
	if _, err := Seal("n", bad, sample()); err == nil {
		t.Error("sealed to a 31-byte key")
	}
}

func TestFingerprintAndNames(t *testing.T) {
	a, b := mustKey(t).Public(), mustKey(t).Public()
	if fa, fa2 := Fingerprint(a), Fingerprint(a); Fingerprint(b) == fa || fa2 != fa {
		t.Error("fingerprints do not tell keys apart")
	}
	s := Secret("warmer-system", "node-a", Fingerprint(a), "h", []byte("x"))
	if n, ok := NodeOf(s); !ok || n != "node-a" {
		t.Errorf("NodeOf = %q, %v", n, ok)
	}
	s.Name = Name("node-b")
	if _, ok := NodeOf(s); ok {
		t.Error("a bundle under another node's name counts as that node's")
	}
	if len(Name(string(bytes.Repeat([]byte("n"), 253)))) > 63 {
		t.Error("bundle name too long")
	}
}

func TestEntryOf(t *testing.T) {
	for _, tc := range []struct {
		name    string
		sec     corev1.Secret
		problem string
	}{
		{"opaque", corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "o"}, Type: corev1.SecretTypeOpaque}, `pull secret "o" has type "Opaque"`},
		{"no key", corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "k"}, Type: corev1.SecretTypeDockercfg}, `pull secret "k" has no .dockercfg key`},
	} {
		if got := EntryOf(&tc.sec); got.Problem == "" || got.Data != nil || !bytes.HasPrefix([]byte(got.Problem), []byte(tc.problem)) {
			t.Errorf("%s: %+v; want problem %q", tc.name, got, tc.problem)
		}
	}
}
