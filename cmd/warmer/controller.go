package main

import (
	"cmp"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/leaderelection"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/controllers/gate"
	"github.com/warmer-dev/warmer/controllers/imagewarm"
	"github.com/warmer-dev/warmer/controllers/pullsecrets"
	"github.com/warmer-dev/warmer/internal/credbundle"
)

// controllerFlags are the status controller's settings.
type controllerFlags struct {
	commonFlags
	leaderElect      bool
	leaderNamespace  string
	minWriteInterval time.Duration
	servedInterval   time.Duration
	agentNamespace   string
	lease            leaseFlags
	imagesFromKinds  []string
	secretResync     time.Duration
	warmGate         bool
}

// leaseFlags time the leader election, under kube-controller-manager's flag
// names. The defaults are longer than controller-runtime's 15 s/10 s/2 s:
// the lease requests share the API server's service-account priority level
// with every agent, and a thousand agents starting a warm at once queued a
// renewal past 10 s (test/perf BenchmarkScale), which ends the process.
// Status aggregation can wait a minute for a successor.
type leaseFlags struct {
	duration, renewDeadline, retryPeriod time.Duration
}

func (l *leaseFlags) bind(fs *pflag.FlagSet) {
	fs.DurationVar(&l.duration, "leader-elect-lease-duration", 60*time.Second, "How long a replica waits, from when it last saw the leader's Lease renewed, before it takes the lead of a leader that stopped without releasing it.")
	fs.DurationVar(&l.renewDeadline, "leader-elect-renew-deadline", 40*time.Second, "How long the leader keeps trying to renew its Lease before it gives up the lead and exits; shorter than the lease duration.")
	fs.DurationVar(&l.retryPeriod, "leader-elect-retry-period", 5*time.Second, "Wait between two attempts to take or renew the Lease (with up to 120 % jitter while taking it).")
}

// validate refuses what client-go's leader election would refuse at start.
func (l *leaseFlags) validate() error {
	for name, d := range map[string]time.Duration{"leader-elect-lease-duration": l.duration,
		"leader-elect-renew-deadline": l.renewDeadline, "leader-elect-retry-period": l.retryPeriod} {
		if err := positive(name, d); err != nil {
			return err
		}
	}
	if l.renewDeadline >= l.duration {
		return usagef("--leader-elect-renew-deadline (%v) must be shorter than --leader-elect-lease-duration (%v)", l.renewDeadline, l.duration)
	}
	if float64(l.renewDeadline) <= leaderelection.JitterFactor*float64(l.retryPeriod) {
		return usagef("--leader-elect-renew-deadline (%v) must be longer than %v times --leader-elect-retry-period (%v)",
			l.renewDeadline, leaderelection.JitterFactor, l.retryPeriod)
	}
	return nil
}

func (f *controllerFlags) bind(fs *pflag.FlagSet) {
	fs.BoolVar(&f.leaderElect, "leader-elect", true, "Elect a leader among replicas, so only one writes ImageWarm status.")
	fs.StringVar(&f.leaderNamespace, "leader-election-namespace", "", "Namespace of the leader election Lease; empty: the Pod's own namespace.")
	fs.StringVar(&f.agentNamespace, "agent-namespace", os.Getenv("POD_NAMESPACE"), "Namespace of the agent Pods, whose readiness says which agents are alive: a node whose agent Pod has not been Ready for a minute counts as not reporting and frees its rollout slot (default $POD_NAMESPACE; empty: agents are judged by their reports alone).")
	fs.DurationVar(&f.servedInterval, "served-starts-interval", imagewarm.DefaultServedInterval, "Least time between two writes of one ImageWarm's status for which only servedStarts moved; every such write goes to every agent.")
	fs.DurationVar(&f.minWriteInterval, "min-status-interval", time.Second, "Least time between two progress writes of one ImageWarm's status; a settled result (no node pulling or yet to report) is written at once, and the last state always is.")
	fs.StringSliceVar(&f.imagesFromKinds, "images-from-kinds", kindNames(warmv1.WorkloadKinds),
		"Workload kinds the controller lists and watches, cluster-wide, for ImageWarms' spec.imagesFrom; \"none\" watches none (its RBAC rules can then go). An ImageWarm reading another kind gets ImagesResolved False, reason KindsNotWatched.")
	fs.DurationVar(&f.secretResync, "pull-secret-resync", pullsecrets.DefaultResync, "How often each pull secret an ImageWarm names is read again, so the nodes' credential bundles in --pull-secret-namespace follow a rotated or deleted source (Secrets are not watched); a new name, node key or ImageWarm is sealed at once.")
	fs.BoolVar(&f.warmGate, "warm-gate", false, "Remove the warmer.dev/warm scheduling gate from Pods once their images are warm or their deadline passed, and arm the admission policy that adds it (Lease "+gate.ArmingLease+" in the leader election namespace) while leading. Needs config/components/warm-gate's policies and roles.")
	f.lease.bind(fs)
	f.commonFlags.bind(fs, ":8080", ":8081", true)
}

func kindNames(kinds []warmv1.WorkloadKind) []string {
	out := make([]string, len(kinds))
	for i, k := range kinds {
		out[i] = string(k)
	}
	return out
}

// watchedKinds parses --images-from-kinds: known kinds, each once, or
// "none" alone.
func (f *controllerFlags) watchedKinds() ([]warmv1.WorkloadKind, error) {
	out := []warmv1.WorkloadKind{}
	if len(f.imagesFromKinds) == 1 && f.imagesFromKinds[0] == "none" {
		return out, nil
	}
	for _, name := range f.imagesFromKinds {
		kind := warmv1.WorkloadKind(name)
		if !slices.Contains(warmv1.WorkloadKinds, kind) {
			return nil, usagef("--images-from-kinds: %q is not one of %v, or none", name, kindNames(warmv1.WorkloadKinds))
		}
		if slices.Contains(out, kind) {
			return nil, usagef("--images-from-kinds: %s named twice", name)
		}
		out = append(out, kind)
	}
	return out, nil
}

// controllerFlagSet is the controller's flag set, bound to f; hack/refdocs
// lists it in docs/reference/flags.md.
func controllerFlagSet(f *controllerFlags, help io.Writer) *pflag.FlagSet {
	fs := newFlagSet("controller", "warmer controller sums up the nodes' NodeWarm reports in each ImageWarm's status.", help)
	f.bind(fs)
	return fs
}

func runController(args []string, help io.Writer) error {
	var f controllerFlags
	fs := controllerFlagSet(&f, help)
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := positive("min-status-interval", f.minWriteInterval); err != nil {
		return err
	}
	if err := positive("served-starts-interval", f.servedInterval); err != nil {
		return err
	}
	if err := positive("pull-secret-resync", f.secretResync); err != nil {
		return err
	}
	if err := f.lease.validate(); err != nil {
		return err
	}
	kinds, err := f.watchedKinds()
	if err != nil {
		return err
	}
	cfg, err := f.restConfig()
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	limitMemory()
	lock, err := leaderLock(cfg, &f)
	if err != nil {
		return fmt.Errorf("making the leader election lock: %w", err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme(),
		Metrics:                 f.metricsOptions(),
		HealthProbeBindAddress:  f.probeAddr,
		PprofBindAddress:        f.pprofAddr,
		LeaderElection:          f.leaderElect,
		LeaderElectionID:        leaderElectionID,
		LeaderElectionNamespace: f.leaderNamespace,
		// Under the Pod's name when it has one (leader.go).
		LeaderElectionResourceLockInterface: lock,
		// A successor takes over without waiting out the lease.
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 ptr(f.lease.duration),
		RenewDeadline:                 ptr(f.lease.renewDeadline),
		RetryPeriod:                   ptr(f.lease.retryPeriod),
		Cache:                         controllerCache(kinds, f.secretNamespace, f.agentNamespace, f.warmGate),
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	r := &imagewarm.Reconciler{Client: mgr.GetClient(), MinWriteInterval: f.minWriteInterval, ServedInterval: f.servedInterval, AgentNamespace: f.agentNamespace, WatchedKinds: kinds, Clock: binaryClock}
	if err := r.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the controller: %w", err)
	}
	bundler := &pullsecrets.Bundler{Namespace: f.secretNamespace, Resync: f.secretResync, Clock: binaryClock}
	if err := bundler.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the credential bundles: %w", err)
	}
	if err := setupWarmGate(mgr, &f); err != nil {
		return fmt.Errorf("setting up the warm gate: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	ctrl.Log.Info("Starting controller", "version", version)
	return mgr.Start(ctrl.SetupSignalHandler())
}

// controllerCache is the controller's cache: the workload kinds it
// watches, of Secrets only the credential bundles in its namespace, of Pods
// only the agents' in theirs and, with the warm gate, the opted-in Pods of
// the other namespaces and the Nodes without their status.
func controllerCache(kinds []warmv1.WorkloadKind, secretNamespace, agentNamespace string, warmGate bool) cache.Options {
	opts := imagewarm.CacheOptions(kinds)
	opts.ByObject[&corev1.Secret{}] = pullsecrets.CacheOptions(secretNamespace)
	pods := cache.ByObject{Namespaces: map[string]cache.Config{}}
	if agentNamespace != "" {
		pods = imagewarm.AgentPodCache(agentNamespace)
	}
	if warmGate {
		// Selectors per namespace: the agents' namespace keeps its own,
		// every other namespace gives its gated Pods.
		agents := pods.Namespaces
		for ns := range agents {
			agents[ns] = cache.Config{LabelSelector: pods.Label, Transform: pods.Transform}
		}
		agents[cache.AllNamespaces] = gate.PodCacheConfig()
		pods = cache.ByObject{Namespaces: agents}
		opts.ByObject[&corev1.Node{}] = gate.NodeCache()
	}
	if len(pods.Namespaces) > 0 {
		opts.ByObject[&corev1.Pod{}] = pods
	}
	return opts
}

// setupWarmGate starts the gate's controller when --warm-gate is set. Its
// arming Lease lives beside the leader election's, owned by the Pod.
func setupWarmGate(mgr ctrl.Manager, f *controllerFlags) error {
	if !f.warmGate {
		return nil
	}
	r := &gate.Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("warmer-controller"), Clock: binaryClock,
		Namespace: cmp.Or(f.leaderNamespace, os.Getenv("POD_NAMESPACE"), credbundle.DefaultNamespace),
		PodName:   os.Getenv(podNameEnv), PodUID: os.Getenv("POD_UID")}
	return r.SetupWithManager(mgr)
}

func ptr[T any](v T) *T { return &v }
