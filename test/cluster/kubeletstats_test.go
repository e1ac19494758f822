package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/pkg/kubeletstats"
	"github.com/warmer-dev/warmer/test/testbed"
)

// TestKubeletStats reads the real kubelet's Summary API with
// pkg/kubeletstats, as the agent's disk guard does, verifying the
// kubelet's serving certificate: with a service-account token of the
// agent's ClusterRole (config/rbac) the kubelet, which asks the API server
// (webhook authentication and authorization), answers with its image
// filesystem, the one holding containerd's root; with a token whose
// account lacks nodes/stats it refuses; a client that does not trust the
// certificate's signer does not get that far.
func TestKubeletStats(t *testing.T) {
	ns := namespace(t)
	agent := accountToken(t, ns, "stats-agent", agentRules(t))
	other := accountToken(t, ns, "stats-other", nil)
	// The kubelet serves a certificate the cluster's signer issued at its
	// request (serverTLSBootstrap), for the node's address: the client
	// checks it against the CAs pods trust, as the agent does by default.
	opts := kubeletstats.Options{Port: node.KubeletPort}
	trusting := func(token string, ca []byte) *rest.Config {
		return &rest.Config{BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: ca}}
	}
	c, err := kubeletstats.New(trusting(agent, node.ClusterCA), node.IP, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var fs kubeletstats.FsStats
	// The kubelet has image filesystem figures once its first
	// housekeeping has run.
	testbed.Poll(t, time.Second, time.Minute, "the kubelet's image filesystem figures", func() error {
		fs, err = c.ImageFs(ctx)
		return err
	})
	var st unix.Statfs_t
	if err := unix.Statfs(node.Containerd.Root(), &st); err != nil {
		t.Fatal(err)
	}
	if want := st.Blocks * uint64(st.Bsize); fs.CapacityBytes != want || fs.AvailableBytes > fs.CapacityBytes {
		t.Errorf("kubelet image filesystem %+v; the filesystem of containerd's root has %d bytes", fs, want)
	}

	// Without the CA that signed it, the certificate is refused: the
	// token never leaves.
	unverified, err := kubeletstats.New(trusting(agent, node.Config.CAData), node.IP, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := unverified.ImageFs(ctx); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("trusting only the API server's CA: %v, want a certificate verification error", err)
	}

	refused, err := kubeletstats.New(trusting(other, node.ClusterCA), node.IP, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := refused.ImageFs(ctx); err == nil || !strings.Contains(err.Error(), "403") || !strings.Contains(err.Error(), "stats") {
		t.Errorf("an account without nodes/stats: %v, want the kubelet's 403 naming the stats subresource", err)
	}
}

// agentRules are the rules of every ClusterRole config/rbac grants the
// agent: its own, and those of the features that have roles of their own
// (agent_*_role.yaml), the kubelet's stats among them.
func agentRules(t *testing.T) []rbacv1.PolicyRule {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(testbed.RepoRoot(t), "config", "rbac", "agent_*role.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no agent roles in config/rbac: %v", err)
	}
	var rules []rbacv1.PolicyRule
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range strings.Split(string(b), "\n---\n") {
			var role rbacv1.ClusterRole
			if err := yaml.Unmarshal([]byte(doc), &role); err != nil {
				t.Fatal(err)
			}
			if role.Kind == "ClusterRole" {
				rules = append(rules, role.Rules...)
			}
		}
	}
	return rules
}

// accountToken makes a service account in ns, bound to a ClusterRole of
// rules when there are any, and returns a token of it.
func accountToken(t *testing.T, ns, name string, rules []rbacv1.PolicyRule) string {
	t.Helper()
	ctx := context.Background()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := node.Client.Create(ctx, sa); err != nil {
		t.Fatal(err)
	}
	if rules != nil {
		role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name}, Rules: rules}
		binding := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: role.Name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}},
		}
		if err := node.Client.Create(ctx, role); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = node.Client.Delete(context.Background(), role) })
		if err := node.Client.Create(ctx, binding); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = node.Client.Delete(context.Background(), binding) })
	}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}
	if err := node.Client.SubResource("token").Create(ctx, sa, tr); err != nil {
		t.Fatalf("requesting a token for %s: %v", name, err)
	}
	return tr.Status.Token
}

// checkImageFsFromKubelet checks the installed agent's NodeWarm: it reports
// the image filesystem's size, which it can only have from the kubelet (it
// mounts nothing of it), and the DiskPressure condition is known.
func checkImageFsFromKubelet(t *testing.T) {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(node.Containerd.Root(), &st); err != nil {
		t.Fatal(err)
	}
	capacity := int64(st.Blocks) * st.Bsize
	testbed.Poll(t, time.Second, 2*time.Minute, "the NodeWarm's image filesystem from the kubelet", func() error {
		var nw warmv1.NodeWarm
		if err := node.Client.Get(context.Background(), client.ObjectKey{Name: node.Name}, &nw); err != nil {
			return err
		}
		fs := nw.Status.ImageFilesystem
		c := meta.FindStatusCondition(nw.Status.Conditions, "DiskPressure")
		if fs == nil || fs.CapacityBytes != capacity || c == nil || c.Status != metav1.ConditionFalse {
			return fmt.Errorf("image filesystem %+v, DiskPressure %+v; want capacity %d and False", fs, c, capacity)
		}
		return nil
	})
}
