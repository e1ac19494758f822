package testbed

import (
	"context"
	"path/filepath"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
)

// The identities config/rbac gives warmer's processes, which the test bed
// runs them with.
const (
	// SystemNamespace holds warmer's service accounts and the
	// controller's leader-election Lease.
	SystemNamespace = "warmer-system"
	// AgentServiceAccount and ControllerServiceAccount are the service
	// accounts of the agent and of the controller in SystemNamespace.
	AgentServiceAccount      = "warmer-agent"
	ControllerServiceAccount = "warmer-controller"
	// NodeNameExtra is the user extra in which the API server puts the
	// node a service-account token is bound to, and which warmer's
	// admission policies read.
	NodeNameExtra = "authentication.kubernetes.io/node-name"
)

// tokenLifetime is how long the processes' tokens last: longer than the
// longest test, since the bed never renews them. The API server's
// --service-account-max-token-expiration, which envtest does not set,
// would cap it.
const tokenLifetime = 2 * time.Hour

// fieldOwner is the server-side apply manager of what the bed installs.
const fieldOwner = "warmer-testbed"

// InstallIdentity installs warmer's shipped identity, read from the
// repository at test time: the warmer-system namespace, config/rbac (the
// service accounts and their roles) and config/policy (the admission
// policies), and waits until the policies are enforced. It is idempotent:
// every call after the first on a control plane does nothing.
func (cp *ControlPlane) InstallIdentity(t TB) {
	t.Helper()
	cp.installIdentity(t, true)
}

// InstallRolesWithoutPolicies is InstallIdentity without config/policy:
// the service accounts and their roles only, so that test/perf can tell
// what the admission policies cost the API server. A plane keeps the
// identity it was first given: a later InstallIdentity (AgentKubeconfig's,
// AgentConfig's) adds no policy.
func (cp *ControlPlane) InstallRolesWithoutPolicies(t TB) {
	t.Helper()
	cp.installIdentity(t, false)
}

func (cp *ControlPlane) installIdentity(t TB, policies bool) {
	t.Helper()
	cp.identityMu.Lock()
	defer cp.identityMu.Unlock()
	if cp.identity {
		return
	}
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: SystemNamespace}}
	if err := cp.Client.Create(ctx, ns); client.IgnoreAlreadyExists(err) != nil {
		t.Fatalf("creating namespace %s: %v", SystemNamespace, err)
	}
	root := RepoRoot(t)
	dirs := []string{"rbac"}
	if policies {
		dirs = append(dirs, "policy")
	}
	for _, dir := range dirs {
		for _, o := range Kustomize(t, filepath.Join(root, "config", dir)) {
			err := cp.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner(fieldOwner), client.ForceOwnership)
			if err != nil {
				t.Fatalf("applying %s %s of config/%s: %v", o.GetKind(), o.GetName(), dir, err)
			}
		}
	}
	if policies {
		cp.waitForPolicies(t)
	}
	cp.identity = true
}

// AllowClusterLevers labels namespace ns warmer.dev/cluster-levers=allowed,
// as a cluster's operator marks the namespaces whose ImageWarms may set
// spec.startupTaint, retention: Pinned or a control-plane nodeSelector:
// config/policy refuses them elsewhere.
func (cp *ControlPlane) AllowClusterLevers(t TB, ns string) {
	t.Helper()
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"warmer.dev/cluster-levers":"allowed"}}}`))
	if err := cp.Client.Patch(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, patch); err != nil {
		t.Fatalf("marking namespace %s for the cluster levers: %v", ns, err)
	}
	// The policy reads the namespace's labels from the API server's own
	// cache, a moment behind the patch: wait until a dry run that needs
	// the label is taken, or a test's ImageWarm is refused by timing.
	Eventually(t, 30*time.Second, "namespace "+ns+" allowed the cluster levers", func() error {
		iw := &warmv1.ImageWarm{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "levers-probe"},
			Spec:       warmv1.ImageWarmSpec{Images: []warmv1.ImageReference{"registry.invalid/probe:v1"}, Retention: warmv1.RetentionPinned},
		}
		return cp.Client.Create(context.Background(), iw, client.DryRunAll)
	})
}

// policyProbe is a dry-run request that one of the shipped admission
// policies refuses once it is in force.
type policyProbe struct {
	policy string
	do     func(ctx context.Context) error
}

// waitForPolicies waits until the API server enforces the shipped
// admission policies. A policy takes effect a moment after it is created,
// not with the create: an agent started before would have its writes let
// through unchecked, and a test's ImageWarm refused or not depending on
// timing. Dry runs go through admission and store nothing.
func (cp *ControlPlane) waitForPolicies(t TB) {
	t.Helper()
	probes := []policyProbe{cp.nodeWarmProbe(t), cp.leversProbe()}
	if p, ok := cp.taintProbe(t); ok {
		probes = append(probes, p)
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, p := range probes {
		for {
			err := p.do(context.Background())
			if err != nil && strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+p.policy+"'") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("admission policy %s not in force within 30s: its probe got %v", p.policy, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// nodeWarmProbe is an agent creating another node's NodeWarm.
func (cp *ControlPlane) nodeWarmProbe(t TB) policyProbe {
	agent := cp.impersonating(t, "probe-node-a")
	return policyProbe{policy: "warmer-agent-own-nodewarm", do: func(ctx context.Context) error {
		nw := &warmv1.NodeWarm{ObjectMeta: metav1.ObjectMeta{Name: "probe-node-b"}}
		return agent.Create(ctx, nw, client.DryRunAll)
	}}
}

// leversProbe is an admin setting spec.startupTaint in a namespace not
// marked for it.
func (cp *ControlPlane) leversProbe() policyProbe {
	return policyProbe{policy: "warmer-imagewarm-cluster-levers", do: func(ctx context.Context) error {
		iw := &warmv1.ImageWarm{
			ObjectMeta: metav1.ObjectMeta{Namespace: SystemNamespace, Name: "levers-probe"},
			Spec:       warmv1.ImageWarmSpec{Images: []warmv1.ImageReference{"registry.invalid/probe:v1"}, StartupTaint: true},
		}
		return cp.Client.Create(ctx, iw, client.DryRunAll)
	}}
}

// taintProbe is an agent relabelling its own Node, which the taint policy
// forbids. It needs a Node to patch: with none yet, there is no probe.
func (cp *ControlPlane) taintProbe(t TB) (policyProbe, bool) {
	var nodes corev1.NodeList
	if err := cp.Client.List(context.Background(), &nodes, client.Limit(1)); err != nil {
		t.Fatalf("listing Nodes: %v", err)
	}
	if len(nodes.Items) == 0 {
		return policyProbe{}, false
	}
	name := nodes.Items[0].Name
	agent := cp.impersonating(t, name)
	return policyProbe{policy: "warmer-agent-own-node-taint", do: func(ctx context.Context) error {
		patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"warmer-testbed/probe":"x"}}}`))
		return agent.Patch(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, patch, client.DryRunAll)
	}}, true
}

// ImpersonateAgent is a client acting as node's agent: the agent's
// service account with node's name in the user's extra, as a Pod-bound
// token of an agent on node authenticates. For tests that play an agent
// without running one; the bed's agents run with real tokens.
func (cp *ControlPlane) ImpersonateAgent(t TB, node string) client.Client {
	t.Helper()
	return cp.impersonating(t, node)
}

// impersonating is an admin client acting as node's agent, for the policy
// probes only: the agents themselves run with real tokens.
func (cp *ControlPlane) impersonating(t TB, node string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(cp.Config)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: serviceAccountUser(AgentServiceAccount),
		Groups:   serviceAccountGroups,
		Extra:    map[string][]string{NodeNameExtra: {node}},
	}
	c, err := client.New(cfg, client.Options{Scheme: Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// serviceAccountUser is the user name of a service account in
// SystemNamespace.
func serviceAccountUser(sa string) string {
	return "system:serviceaccount:" + SystemNamespace + ":" + sa
}

// serviceAccountGroups are the groups the API server gives every token of
// a service account in SystemNamespace.
var serviceAccountGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + SystemNamespace, "system:authenticated"}

// AgentKubeconfig installs the shipped identity (InstallIdentity) and
// returns the path of a kubeconfig for node's agent: a token of the
// warmer-agent service account that the API server ties to node, putting
// its name in the user's extra (NodeNameExtra), where warmer's admission
// policies look for it. The Node must exist.
func (cp *ControlPlane) AgentKubeconfig(t TB, node string) string {
	t.Helper()
	cp.InstallIdentity(t)
	token := cp.requestToken(t, AgentServiceAccount, cp.agentBinding(t, node))
	path := writeTokenKubeconfig(t, cp.Config, "agent-"+node, token)
	planes.Store(path, cp)
	return path
}

// AgentConfig is AgentKubeconfig for an agent run in the test's own
// process (test/scale's simulated fleet): a rest.Config with the same
// Pod-bound token, so every request made with it carries node's name as
// a real agent's does.
func (cp *ControlPlane) AgentConfig(t TB, node string) *rest.Config {
	t.Helper()
	cp.InstallIdentity(t)
	token := cp.requestToken(t, AgentServiceAccount, cp.agentBinding(t, node))
	return &rest.Config{Host: cp.Config.Host, BearerToken: token,
		TLSClientConfig: rest.TLSClientConfig{CAData: cp.Config.CAData}}
}

// agentBinding is the object the agent's token on node is bound to.
//
// On a real cluster it is the agent's Pod, and the API server takes the
// node from the Pod's spec.nodeName. The bed binds it the same way, to a
// stand-in Pod that nothing runs: a Pod-bound token outlives its Node's
// replacement by one of the same name (the API server checks the Pod, not
// the Node), which a Node-bound token does not, and tests replace Nodes
// under running agents. Where a kubelet runs (a RealNode) it would run the
// stand-in, so there the token is bound to the Node itself, which gives
// the same extra and which those beds never replace.
func (cp *ControlPlane) agentBinding(t TB, node string) *authenticationv1.BoundObjectReference {
	t.Helper()
	ctx := context.Background()
	if cp.runsPods {
		var n corev1.Node
		if err := cp.Client.Get(ctx, client.ObjectKey{Name: node}, &n); err != nil {
			t.Fatalf("reading Node %s for its agent's token: %v", node, err)
		}
		return &authenticationv1.BoundObjectReference{Kind: "Node", APIVersion: "v1", Name: n.Name, UID: n.UID}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: SystemNamespace, Name: "warmer-agent-" + node},
		Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: AgentServiceAccount,
			Containers: []corev1.Container{{Name: "agent", Image: WarmerRepo + ":testbed-stand-in"}}},
	}
	// A second agent kubeconfig for the node (a restarted agent) shares
	// the first's Pod.
	err := cp.Client.Create(ctx, pod)
	if apierrors.IsAlreadyExists(err) {
		err = cp.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod)
	}
	if err != nil {
		t.Fatalf("creating the stand-in Pod of node %s's agent: %v", node, err)
	}
	return &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}
}

// ControllerKubeconfig installs the shipped identity (InstallIdentity) and
// returns the path of a kubeconfig with a token of the warmer-controller
// service account.
func (cp *ControlPlane) ControllerKubeconfig(t TB) string {
	t.Helper()
	cp.InstallIdentity(t)
	path := writeTokenKubeconfig(t, cp.Config, "controller", cp.requestToken(t, ControllerServiceAccount, nil))
	planes.Store(path, cp)
	return path
}

// requestToken asks the TokenRequest API for a token of the service
// account sa, bound to an object unless bound is nil.
func (cp *ControlPlane) requestToken(t TB, sa string, bound *authenticationv1.BoundObjectReference) string {
	t.Helper()
	acct := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: SystemNamespace, Name: sa}}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: ptr.To(int64(tokenLifetime / time.Second)),
		BoundObjectRef:    bound,
	}}
	if err := cp.Client.SubResource("token").Create(context.Background(), acct, tr); err != nil {
		t.Fatalf("requesting a token of %s/%s: %v", SystemNamespace, sa, err)
	}
	// The API server may shorten the lifetime it was asked for; a token
	// that ends within a test would fail it for no fault of warmer.
	if left := time.Until(tr.Status.ExpirationTimestamp.Time); left < tokenLifetime-time.Minute {
		t.Fatalf("the API server issued a token of %s/%s for %v, not %v", SystemNamespace, sa, left.Round(time.Second), tokenLifetime)
	}
	return tr.Status.Token
}

// writeTokenKubeconfig writes, in a directory of the test's, a kubeconfig
// that reaches cfg's API server, trusting its CA, with token, and returns
// its path. clientcmd writes it with mode 0600.
func writeTokenKubeconfig(t TB, cfg *rest.Config, user, token string) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["testbed"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts["testbed"] = &clientcmdapi.Context{Cluster: "testbed", AuthInfo: user}
	kc.CurrentContext = "testbed"
	path := filepath.Join(shortDir(t, "sa"), user+".kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatalf("writing the kubeconfig of %s: %v", user, err)
	}
	return path
}

// WhoAmI returns the user a kubeconfig authenticates as, with the extra
// the API server gives it, as a SelfSubjectReview reports it.
func WhoAmI(t TB, kubeconfig string) authenticationv1.UserInfo {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	return WhoAmIWith(t, cfg)
}

// WhoAmIWith is WhoAmI for a rest.Config.
func WhoAmIWith(t TB, cfg *rest.Config) authenticationv1.UserInfo {
	t.Helper()
	c, err := client.New(cfg, client.Options{Scheme: Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ssr := &authenticationv1.SelfSubjectReview{}
	if err := c.Create(context.Background(), ssr); err != nil {
		t.Fatalf("SelfSubjectReview as %s: %v", cfg.Host, err)
	}
	return ssr.Status.UserInfo
}
