package agent

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/warmer-dev/warmer/internal/secretcopy"
)

// TestCopyOnItsWay: a pull waits for a copy the controller has not written
// yet, for copyGrace; then the missing copy is reported and the pull goes
// ahead without it. A copy that arrives is used, and a placeholder's
// problem is reported as it is. (A fake client: the timing is the logic
// under test; the real copier and agent are in controllers/pullsecrets
// and test/security.)
func TestCopyOnItsWay(t *testing.T) {
	const ns = "warmer-system"
	src := types.NamespacedName{Namespace: "team", Name: "regcred"}
	bad := types.NamespacedName{Namespace: "team", Name: "opaque"}
	c := fake.NewClientBuilder().WithObjects(secretcopy.Placeholder(bad, ns, `pull secret "opaque" has type "Opaque"`)).Build()
	missing := map[types.NamespacedName]time.Time{}
	t0 := time.Now()
	pass := func(at time.Duration, names ...types.NamespacedName) (bool, map[types.NamespacedName]string) {
		s := newSecretKeyrings(c, ns, missing, t0.Add(at))
		_, wait := s.keyring(t.Context(), names)
		return wait, s.outcomes()
	}
	if wait, out := pass(0, src); !wait || len(out) != 0 {
		t.Fatalf("copy not written yet: wait %v, outcomes %v; want a wait and nothing reported", wait, out)
	}
	if wait, _ := pass(copyGrace/2, src); !wait {
		t.Fatal("still within the grace: want a wait")
	}
	wait, out := pass(copyGrace, src)
	if wait || !strings.Contains(out[src], "has no copy") {
		t.Fatalf("after the grace: wait %v, outcomes %v; want the missing copy reported", wait, out)
	}
	sec := &corev1.Secret{Type: corev1.SecretTypeDockerConfigJson, Data: map[string][]byte{
		corev1.DockerConfigJsonKey: []byte(`{"auths":{"reg.example":{"username":"u","password":"p"}}}`)}}
	sec.Namespace, sec.Name = src.Namespace, src.Name
	if err := c.Create(t.Context(), secretcopy.Copy(sec, ns)); err != nil {
		t.Fatal(err)
	}
	wait, out = pass(copyGrace+time.Second, src, bad)
	if wait || out[src] != "" || !strings.Contains(out[bad], `has type "Opaque"`) {
		t.Fatalf("copy written: wait %v, outcomes %v; want the copy used and the placeholder's problem", wait, out)
	}
	if _, still := missing[src]; still {
		t.Error("a copy found is still remembered as missing")
	}
}
