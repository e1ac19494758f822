// Package security checks, on the real test bed, that warmer keeps pull
// secrets to themselves: never in logs, events, statuses or metrics, and
// never read across namespaces.
package security

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/internal/credbundle"
	"github.com/warmer-dev/warmer/test/testbed"
	"github.com/warmer-dev/warmer/test/testbed/build"
	"github.com/warmer-dev/warmer/test/testbed/hostcheck"
)

const (
	nsA  = "team-a"
	nsB  = "team-b"
	node = "node-sec"
)

// TestSecrets warms private images with a right, a wrong and a legacy
// secret, tries to borrow another namespace's secret, then searches
// everything warmer wrote or served for the secret values.
func TestSecrets(t *testing.T) {
	regs := testbed.StartRegistries(t)
	user, pass := regs.Auth.Username(), regs.Auth.Password()
	wrong := "wrong-" + strings.TrimPrefix(pass, "s3cret-") + "-x"
	// Credential-provider plugins: one hands out the registry's login, two
	// fail while holding a password of their own, one printing it on
	// stderr, one in the garbage it writes to stdout.
	pluginPass := "plugin-" + wrong
	plugin := testbed.SetUpCredentialPlugin(t,
		testbed.PluginProvider{Name: "sec-good", MatchImages: []string{regs.Auth.Host + "/private/viaplugin"}, CacheDuration: "1m", Username: user, Password: pass},
		testbed.PluginProvider{Name: "sec-exit", MatchImages: []string{regs.Auth.Host + "/private/exitplugin"}, CacheDuration: "1m", Args: []string{"--mode", "exit"}, Username: user, Password: pluginPass},
		testbed.PluginProvider{Name: "sec-json", MatchImages: []string{regs.Auth.Host + "/private/jsonplugin"}, CacheDuration: "1m", Args: []string{"--mode", "badjson"}, Username: user, Password: pluginPass},
	)
	settings := testbed.DefaultAgent.With(plugin.Flags()...)
	f := testbed.StartFleet(t, map[string]map[string]string{node: nil}, testbed.FleetOptions{Agent: &settings})
	for _, ns := range []string{nsA, nsB} {
		f.Create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	f.CP.LendPullSecrets(t, nsA) // team-a lends warmer its pull secrets; team-b does not
	small := testbed.ImageOptions{LayerSize: 64 << 10}
	private := regs.Auth.PushRandom(t, "private/right:v1", small).Ref
	denied := regs.Auth.PushRandom(t, "private/wrong:v1", small).Ref
	legacy := regs.Auth.PushRandom(t, "private/legacy:v1", small).Ref
	borrowed := regs.Auth.PushRandom(t, "private/borrowed:v1", small).Ref
	viaPlugin := regs.Auth.PushRandom(t, "private/viaplugin:v1", small).Ref
	exitPlugin := regs.Auth.PushRandom(t, "private/exitplugin:v1", small).Ref
	jsonPlugin := regs.Auth.PushRandom(t, "private/jsonplugin:v1", small).Ref
	secrets := []*corev1.Secret{
		build.DockerConfigSecret(nsA, "regcred", regs.Auth.Host, user, pass),
		build.DockerConfigSecret(nsA, "badcred", regs.Auth.Host, user, wrong),
		legacySecret(nsA, "legacycred", regs.Auth.Host, user, pass),
		build.DockerConfigSecret(nsB, "cross", regs.Auth.Host, user, pass),
	}
	for _, s := range secrets {
		f.Create(t, s)
	}
	f.Create(t, warmWith(nsA, "private", "regcred", private))
	f.Create(t, warmWith(nsA, "denied", "badcred", denied))
	f.Create(t, warmWith(nsA, "legacy", "legacycred", legacy))
	f.Create(t, build.ImageWarm(nsA, "plugins", build.Images(viaPlugin, exitPlugin, jsonPlugin)))

	t.Run("right and legacy secrets pull", func(t *testing.T) {
		testbed.Eventually(t, 90*time.Second, "private images", func() error { return f.Nodes[node].AllPresent(t, private, legacy) })
	})
	t.Run("wrong password is Unauthorized", func(t *testing.T) {
		waitReason(t, f, nsA, "denied", denied, "Unauthorized")
	})
	t.Run("credential providers: one pulls without a secret, failing ones are classified", func(t *testing.T) {
		testbed.Eventually(t, 90*time.Second, "image via the plugin", func() error { return f.Nodes[node].AllPresent(t, viaPlugin) })
		waitReason(t, f, nsA, "plugins", exitPlugin, "CredentialProviderFailed")
		waitReason(t, f, nsA, "plugins", jsonPlugin, "CredentialProviderFailed")
	})
	t.Run("another namespace's secret cannot be borrowed", func(t *testing.T) {
		testBorrow(t, f, borrowed)
	})
	t.Run("the agent runs as its service account, refused what its role refuses", func(t *testing.T) {
		testAgentIdentity(t, f)
	})
	t.Run("secret values appear nowhere", func(t *testing.T) {
		// The agent sums up an ImageWarm's failures in one event once
		// they held still (up to a minute while they change): wait for
		// the plugins' before searching.
		testbed.Eventually(t, 90*time.Second, "the plugins' summed-up Failed event", func() error {
			for _, e := range f.Events(t, nsA, "plugins", "Failed") {
				if strings.Contains(e.Note, "CredentialProviderFailed") {
					return nil
				}
			}
			return fmt.Errorf("no Failed event naming CredentialProviderFailed")
		})
		needles := append(secretForms(user, pass, wrong, secrets), hostcheck.LeakForms("the failing plugins' password", user, pluginPass)...)
		shown := everythingWarmerShows(t, f)
		// The search must cover the failure paths, where a leak is likeliest.
		hostcheck.SearchLeaks(t, shown, map[string][]string{"the agent's log": {denied, "sec-exit", "sec-json"}, "events.k8s.io events": {"InvalidPullSecret", "CredentialProviderFailed"},
			"NodeWarms": {"401 Unauthorized", "PluginFailed", "PluginBadResponse"}, "ImageWarms": {"Unauthorized", "CredentialProviderFailed"},
			"the agent's /metrics": {`reason="Unauthorized"`, `result="PluginBadResponse"`}}, needles)
	})
}

// testBorrow: a user who may only create ImageWarms in team-a names team-b's
// secret. The controller looks for it in team-a only, the agent reports it
// missing, and neither asks the API server for any team-b secret or reads
// a Secret outside team-a by anything but a GET.
func testBorrow(t *testing.T, f *testbed.Fleet, image string) {
	ctx := context.Background()
	c := limitedUser(t, f)
	if err := c.Create(ctx, warmWith(nsB, "not-mine", "cross", image)); !apierrors.IsForbidden(err) {
		t.Fatalf("team-a user creating in team-b: %v, want Forbidden", err)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: nsB, Name: "cross"}, &corev1.Secret{}); !apierrors.IsForbidden(err) {
		t.Fatalf("team-a user reading team-b's secret: %v, want Forbidden", err)
	}
	if err := c.Create(ctx, warmWith(nsA, "borrow", "cross", image)); err != nil {
		t.Fatal(err)
	}
	waitReason(t, f, nsA, "borrow", image, "Unauthorized")
	testbed.Eventually(t, 60*time.Second, "InvalidPullSecret event", func() error {
		for _, e := range f.Events(t, nsA, "borrow", "InvalidPullSecret") {
			if strings.Contains(e.Note, `pull secret "cross" not found in namespace "team-a"`) {
				return nil
			}
		}
		return fmt.Errorf("no InvalidPullSecret event naming team-a")
	})
	if f.Nodes[node].Present(t, image) {
		t.Fatalf("%s was pulled with a borrowed secret", image)
	}
	reads := secretRequests(t, f.CP.AuditLog)
	// The controller reads the secrets team-a's ImageWarms name, in
	// team-a, to seal them into the node's bundle; the agent reads only
	// that bundle.
	bundle := credbundle.Name(node)
	if !reads["get "+nsA+"/cross"] || !reads["get "+nsA+"/regcred"] || !reads["get "+credbundle.DefaultNamespace+"/"+bundle] {
		t.Fatalf("the audit log lacks warmer's reads in %s and of the node's bundle %s (%v): it would prove nothing", nsA, bundle, reads)
	}
	for r := range reads {
		inWarmer := strings.Contains(r, " "+credbundle.DefaultNamespace+"/")
		if strings.Contains(r, " "+nsB+"/") || (!inWarmer && !strings.HasPrefix(r, "get ")) {
			t.Errorf("warmer made the request %q", r)
		}
	}
}

// testAgentIdentity checks that the agent runs with the credentials it
// ships with, not the admin's: its kubeconfig is the warmer-agent service
// account's, carrying its node's name; listing every Secret, which its
// role does not grant, is refused; and its NodeWarm, which the admission
// policy lets only that node's agent write, is there.
func testAgentIdentity(t *testing.T, f *testbed.Fleet) {
	ctx := context.Background()
	kubeconfig := flagOf(t, f.Nodes[node].Agent.Pid(), "--kubeconfig")
	u := testbed.WhoAmI(t, kubeconfig)
	agentUser := "system:serviceaccount:" + testbed.SystemNamespace + ":" + testbed.AgentServiceAccount
	if u.Username != agentUser || !slices.Equal(u.Extra[testbed.NodeNameExtra], []string{node}) {
		t.Errorf("the agent runs as %s with %s %v, want %s on %s", u.Username, testbed.NodeNameExtra, u.Extra[testbed.NodeNameExtra], agentUser, node)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	agent, err := client.New(cfg, client.Options{Scheme: testbed.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	err = agent.List(ctx, &corev1.SecretList{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `cannot list resource "secrets"`) {
		t.Errorf("the agent's credentials listing every Secret: %v, want Forbidden by RBAC", err)
	}
	if _, err := f.NodeWarm(node); err != nil {
		t.Errorf("the agent's NodeWarm: %v", err)
	}
}

// limitedUser is a client for a user who may create and read ImageWarms in
// team-a and do nothing else.
func limitedUser(t *testing.T, f *testbed.Fleet) client.Client {
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "warm-author"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{warmv1.GroupVersion.Group}, Resources: []string{"imagewarms"},
			Verbs: []string{"create", "get", "list", "watch"}}}}
	f.Create(t, role)
	f.Create(t, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "warm-author"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"}}})
	c, err := client.New(f.CP.AddUser(t, "alice"), client.Options{Scheme: testbed.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// secretRequests reads the API server's audit log and returns, as
// "verb namespace/name", every Secret request a warmer process made.
func secretRequests(t *testing.T, path string) map[string]bool {
	t.Helper()
	file, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	out := map[string]bool{}
	sc := bufio.NewScanner(file)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var e struct {
			Verb      string `json:"verb"`
			UserAgent string `json:"userAgent"`
			ObjectRef struct {
				Resource, Namespace, Name string
			} `json:"objectRef"`
		}
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.ObjectRef.Resource != "secrets" || !strings.HasPrefix(e.UserAgent, "warmer") {
			continue
		}
		out[e.Verb+" "+e.ObjectRef.Namespace+"/"+e.ObjectRef.Name] = true
	}
	return out
}

func warmWith(ns, name, secret string, images ...string) *warmv1.ImageWarm {
	iw := build.ImageWarm(ns, name, build.Images(images...))
	iw.Spec.ImagePullSecrets = []warmv1.SecretReference{{Name: secret}}
	return iw
}

// legacySecret is a kubernetes.io/dockercfg Secret whose login is in the
// auth field, base64("user:password").
func legacySecret(ns, name, host, user, pass string) *corev1.Secret {
	auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Type:       corev1.SecretTypeDockercfg,
		Data:       map[string][]byte{corev1.DockerConfigKey: []byte(fmt.Sprintf(`{%q:{"auth":%q}}`, host, auth))},
	}
}

func waitReason(t *testing.T, f *testbed.Fleet, ns, warm, image, reason string) {
	t.Helper()
	testbed.Eventually(t, 90*time.Second, reason+" in the NodeWarm and the ImageWarm", func() error {
		img, err := f.NodeImage(node, image)
		if err != nil {
			return err
		}
		if img.Reason != reason {
			return fmt.Errorf("NodeWarm: state %s reason %q", img.State, img.Reason)
		}
		st := f.ImageWarm(t, ns, warm).Status
		if len(st.Failures) == 0 || st.Failures[0].Reason != reason {
			return fmt.Errorf("ImageWarm failures %+v", st.Failures)
		}
		return nil
	})
}

// secretForms are the ways a secret value could leak: as written, in
// base64 alone or as docker's auth field, and as the Secret's data.
func secretForms(user, pass, wrong string, secrets []*corev1.Secret) []hostcheck.Needle {
	out := append(hostcheck.LeakForms("the password", user, pass), hostcheck.LeakForms("the wrong password", user, wrong)...)
	for _, s := range secrets {
		for k, v := range s.Data {
			out = append(out, hostcheck.Needle{Name: s.Namespace + "/" + s.Name + " " + k + " in base64", Value: base64.StdEncoding.EncodeToString(v)})
		}
	}
	return out
}

// everythingWarmerShows gathers, by what it is, every text warmer wrote or
// serves: the agent's and the controller's logs, all events, all statuses,
// and both /metrics pages.
func everythingWarmerShows(t *testing.T, f *testbed.Fleet) map[string]string {
	ctx := context.Background()
	out := map[string]string{}
	n := f.Nodes[node]
	out["the agent's log"] = readFile(t, n.Agent.LogPath())
	out["the controller's log"] = readFile(t, f.Controller.LogPath())
	var evs eventsv1.EventList
	var core corev1.EventList
	var iws warmv1.ImageWarmList
	var nws warmv1.NodeWarmList
	for what, list := range map[string]client.ObjectList{"events.k8s.io events": &evs, "core events": &core, "ImageWarms": &iws, "NodeWarms": &nws} {
		if err := f.CP.Client.List(ctx, list); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(list)
		out[what] = string(b)
	}
	out["the agent's /metrics"] = scrape(t, n.Metrics)
	out["the controller's /metrics"] = f.ScrapeController(t)
	return out
}

func readFile(t *testing.T, path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func scrape(t *testing.T, hostPort string) string {
	resp, err := http.Get("http://" + hostPort + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// flagOf reads a flag's value from a running process's command line.
func flagOf(t *testing.T, pid int, name string) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Split(string(b), "\x00")
	for i, a := range args {
		if a == name && i+1 < len(args) {
			return args[i+1]
		}
	}
	t.Fatalf("process %d has no %s", pid, name)
	return ""
}
