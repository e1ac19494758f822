package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/controllers/agent"
	"github.com/warmer-dev/warmer/controllers/agent/plan"
	"github.com/warmer-dev/warmer/pkg/criclient"
	"github.com/warmer-dev/warmer/pkg/pullengine"
)

// agentFlags are the agent's settings. Where the kubelet has a flag of the
// same meaning, the name is the kubelet's.
type agentFlags struct {
	commonFlags
	nodeName         string
	criEndpoint      string
	criTimeout       time.Duration
	serialize        bool
	maxParallel      int
	registryQPS      float64
	registryBurst    int
	backOffInitial   time.Duration
	backOffMax       time.Duration
	backOffJitter    float64
	pullTimeout      time.Duration
	largePullBytes   int64
	diskThreshold    int
	diskUnknown      string
	resync           time.Duration
	statusQPS        float64
	perImageEvents   bool
	statusBurst      int
	progressInterval time.Duration
	// bytesInterval and stallTimeout: pulls' bytes (content store).
	bytesInterval, stallTimeout time.Duration
	servedInterval              time.Duration
	retryInterval               time.Duration
	yield                       string
	kubelet                     kubeletFlags
	startupTaint                string
	taintDeadline               time.Duration
	nodeSignals                 bool
	credProviders               credentialProviderFlags
	verifyPolicy                string
	verifyAllowlist             []string
	verification                plan.Verification
}

func (f *agentFlags) bind(fs *pflag.FlagSet) {
	fs.StringVar(&f.nodeName, "node-name", os.Getenv("NODE_NAME"), "Name of the node this agent runs on (default $NODE_NAME; in a DaemonSet, from the downward API).")
	fs.StringVar(&f.criEndpoint, "container-runtime-endpoint", os.Getenv("CONTAINER_RUNTIME_ENDPOINT"), "CRI endpoint, e.g. unix:///run/containerd/containerd.sock (default $CONTAINER_RUNTIME_ENDPOINT, as crictl reads it); empty: the first of the usual containerd, CRI-O and cri-dockerd sockets found.")
	fs.DurationVar(&f.criTimeout, "runtime-request-timeout", 2*time.Minute, "Timeout of every CRI call except pulls, which only end by --pull-timeout or cancellation.")
	fs.BoolVar(&f.serialize, "serialize-image-pulls", false, "Pull one image at a time, as the kubelet does by default. When false, --max-parallel-image-pulls apply.")
	fs.IntVar(&f.maxParallel, "max-parallel-image-pulls", 3, "Most pulls under way at once when pulls are not serialized.")
	fs.Float64Var(&f.registryQPS, "registry-qps", 5, "Most pulls started per second, over all registries; 0 means no limit.")
	fs.IntVar(&f.registryBurst, "registry-burst", 10, "Pulls that may start at once above --registry-qps.")
	fs.DurationVar(&f.backOffInitial, "image-pull-backoff-initial", 10*time.Second, "Back-off after an image's first failed pull; it doubles with each failure.")
	fs.DurationVar(&f.backOffMax, "image-pull-backoff-max", 300*time.Second, "Longest back-off between pulls of a failing image.")
	fs.Float64Var(&f.backOffJitter, "image-pull-backoff-jitter", pullengine.DefaultBackOffJitter, "Largest share of each back-off taken off at random, so nodes that failed together (a registry outage) do not retry together; no wait is longer than the kubelet's, but for the floor of a large image (--large-image-bytes). Between 0 (the kubelet's exact schedule) and 0.5.")
	fs.DurationVar(&f.pullTimeout, "pull-timeout", pullengine.DefaultPullTimeout, "Longest one pull may take, unless an ImageWarm's pullTimeout says otherwise: given once for every started GiB of the image's compressed size, once that is known.")
	fs.Int64Var(&f.largePullBytes, "large-image-bytes", pullengine.DefaultLargePullBytes, "Compressed size from which an image's pull counts as large: while large pulls hold every pull slot, one pauses (its bytes kept) for a smaller image's waiting pull; a failed large pull waits at least as long as it ran (at most an hour) before its next try. -1 turns both off.")
	fs.StringVar(&f.diskUnknown, "image-fs-unknown", "hold", "What the disk guard does while it cannot read the image filesystem's level: hold (no new pull starts until the level can be read; each held image's status says why) or pull (pulls go on unchecked, so one ImageWarm can fill the node's disk; the NodeWarm's DiskPressure condition, a Warning event and warmer_image_filesystem_level_known say the level is unknown).")
	fs.IntVar(&f.diskThreshold, "image-fs-threshold-percent", pullengine.DefaultDiskThresholdPercent, "Start no pull while the image filesystem is fuller than this (the kubelet's image GC starts at 85); 100 turns the guard off.")
	fs.DurationVar(&f.resync, "resync-period", time.Minute, "Longest time between two checks of the runtime's images, so removed images are pulled again.")
	fs.Float64Var(&f.statusQPS, "status-update-qps", 0.5, "Token bucket rate of NodeWarm status writes.")
	fs.IntVar(&f.statusBurst, "status-update-burst", 5, "Token bucket size of NodeWarm status writes.")
	fs.DurationVar(&f.progressInterval, "status-progress-interval", 2*time.Second, "How long a change waits before it is written while pulls are under way (and the least time between two such writes); a settled result is written at once.")
	fs.DurationVar(&f.bytesInterval, "pull-progress-interval", 30*time.Second, "Least time between two NodeWarm writes for which only the bytes of pulls under way moved (images[].progress, the Progress column) when 300 or more nodes pull fleet-wide (the ImageWarms' status.nodes.pulling); fewer pulling write sooner, down to every 2s. 0 writes bytes only along with other changes.")
	fs.DurationVar(&f.retryInterval, "status-retry-interval", time.Minute, "Least time between two NodeWarm writes for which only retries of failing pulls moved (their attempts, a retry under way, the same failure again); a retry that succeeds or fails another way is written as any change; 0 writes each retry.")
	fs.DurationVar(&f.servedInterval, "served-starts-interval", 10*time.Minute, "Least time between two NodeWarm writes for which only the counts of container starts served warm moved (servedStarts, per node and per ImageWarm): a day's tally, and each such write may cost a write of the ImageWarms it counts for, which every agent receives; 0 writes them only along with other changes.")
	fs.DurationVar(&f.stallTimeout, "pull-stall-timeout", pullengine.DefaultStallTimeout, "Cancel a pull whose bytes have not moved for this long (a registry that holds the connection), with reason Stalled and the usual back-off; 0 never does. At least 10s. Needs containerd's content store (the NodeWarm's PullProgress condition says when it cannot be read).")
	fs.StringVar(&f.yield, "yield-to-kubelet", string(pullengine.YieldPause), "What the agent does while the runtime pulls blobs none of its pulls fetches (the kubelet pulling a starting Pod's image): pause (start no warm pull until they are in, and pause the warm pulls under way: each is queued again and resumes from the bytes it had fetched; a pull is paused at most 3 times, and after 5 minutes of yielding pulls start again), wait (start no warm pull, let the ones under way go on), requeue (the former name of pause) or off. Needs containerd's content store.")
	fs.BoolVar(&f.perImageEvents, "per-image-events", false, "Record the kubelet's per-image events (Pulling, Pulled, Failed, BackOff: up to four per image per node) instead of one Warmed and one summed-up Failed event per ImageWarm and node.")
	fs.StringVar(&f.startupTaint, "startup-taint", agent.DefaultStartupTaintKey, "Key of the taint a node may register with to take no Pods until its images are warm: the agent removes it from its node once every ImageWarm with startupTaint that selects the node is warm there. Empty: the agent never touches its node's taints.")
	fs.BoolVar(&f.nodeSignals, "node-signals", true, "Keep the warm labels of ImageWarms with nodeLabel (<namespace>.warm.warmer.dev/<name>) and the ImagesWarm condition on the agent's own Node. Needs patch on nodes and nodes/status, which the install grants with the startup taint's role; false: the agent writes neither.")
	fs.DurationVar(&f.taintDeadline, "startup-taint-deadline", agent.DefaultStartupTaintDeadline, "Longest a node keeps the --startup-taint after it registered: then the agent removes it, warm or not, with a Warning event.")
	fs.StringVar(&f.verifyPolicy, "image-verification-policy", string(plan.NeverVerifyPreloadedImages), "Which images the runtime lists count as present for an ImageWarm without a pull under its own credentials, with the kubelet's names for its imagePullCredentialsVerificationPolicy: NeverVerifyPreloadedImages (images this agent did not pull: baked into the node, pulled by the kubelet or another client), NeverVerifyAllowlistedImages (only the repositories of --image-verification-allowlist), NeverVerify (all, but one this agent pulled with another namespace's pull secrets) or AlwaysVerify (none: each costs the registry a manifest request per node).")
	fs.StringSliceVar(&f.verifyAllowlist, "image-verification-allowlist", nil, "Repositories NeverVerifyAllowlistedImages counts as present without a pull, in the kubelet's form: registry.example/team/app, or a prefix of whole path segments such as registry.example/team/*; no tag or digest.")
	f.kubelet.bind(fs)
	f.credProviders.bind(fs)
	// The agents' metrics stay plain by default: see docs/security.md
	// (every node would otherwise hold an oracle for tokens and RBAC).
	f.commonFlags.bind(fs, ":8080", ":8081", false)
}

func (f *agentFlags) validate() error {
	switch {
	case f.nodeName == "":
		return usagef("--node-name is required (or set NODE_NAME)")
	case f.maxParallel < 1:
		return usagef("--max-parallel-image-pulls must be at least 1, got %d", f.maxParallel)
	case f.registryQPS < 0:
		return usagef("--registry-qps must not be negative, got %v", f.registryQPS)
	case f.registryQPS > 0 && f.registryBurst < 1:
		return usagef("--registry-burst must be at least 1 when --registry-qps is set, got %d", f.registryBurst)
	case f.statusQPS <= 0 || f.statusBurst < 1:
		return usagef("--status-update-qps must be positive and --status-update-burst at least 1")
	case f.backOffJitter < 0 || f.backOffJitter > pullengine.MaxBackOffJitter:
		return usagef("--image-pull-backoff-jitter must be between 0 and %v, got %v", pullengine.MaxBackOffJitter, f.backOffJitter)
	case f.backOffMax < f.backOffInitial:
		return usagef("--image-pull-backoff-max (%v) is shorter than --image-pull-backoff-initial (%v)", f.backOffMax, f.backOffInitial)
	}
	if errs := validation.IsQualifiedName(f.startupTaint); f.startupTaint != "" && len(errs) > 0 {
		return usagef("--startup-taint %q is not a valid taint key: %s", f.startupTaint, strings.Join(errs, "; "))
	}
	if err := f.validateDisk(); err != nil {
		return err
	}
	var err error
	if f.verification, err = plan.NewVerification(f.verifyPolicy, f.verifyAllowlist); err != nil {
		return usagef("--image-verification-policy: %v", err)
	}
	if err := f.validateBytes(); err != nil {
		return err
	}
	if err := f.kubelet.validate(); err != nil {
		return err
	}
	if err := f.credProviders.validate(); err != nil {
		return err
	}
	for name, d := range map[string]time.Duration{"runtime-request-timeout": f.criTimeout, "image-pull-backoff-initial": f.backOffInitial,
		"pull-timeout": f.pullTimeout, "resync-period": f.resync, "status-progress-interval": f.progressInterval,
		"startup-taint-deadline": f.taintDeadline} {
		if err := positive(name, d); err != nil {
			return err
		}
	}
	return nil
}

// validateBytes checks the flags of pulls' bytes: 0 turns each off.
func (f *agentFlags) validateBytes() error {
	switch {
	case f.stallTimeout != 0 && f.stallTimeout < 10*time.Second:
		return usagef("--pull-stall-timeout must be 0 (off) or at least 10s, got %v", f.stallTimeout)
	case f.bytesInterval < 0:
		return usagef("--pull-progress-interval must be 0 (off) or positive, got %v", f.bytesInterval)
	case f.servedInterval < 0:
		return usagef("--served-starts-interval must be 0 (off) or positive, got %v", f.servedInterval)
	case f.retryInterval < 0:
		return usagef("--status-retry-interval must be 0 (off) or positive, got %v", f.retryInterval)
	case f.largePullBytes == 0 || f.largePullBytes < -1:
		return usagef("--large-image-bytes must be -1 (off) or positive, got %d", f.largePullBytes)
	}
	switch pullengine.YieldMode(f.yield) {
	case pullengine.YieldOff, pullengine.YieldWait, pullengine.YieldPause, pullengine.YieldRequeue:
	default:
		return usagef("--yield-to-kubelet must be pause, wait, requeue or off, got %q", f.yield)
	}
	return nil
}

// validateDisk checks the disk guard's flags.
func (f *agentFlags) validateDisk() error {
	switch {
	case f.diskThreshold < 1 || f.diskThreshold > 100:
		return usagef("--image-fs-threshold-percent must be between 1 and 100, got %d", f.diskThreshold)
	case f.diskUnknown != "pull" && f.diskUnknown != "hold":
		return usagef("--image-fs-unknown must be pull or hold, got %q", f.diskUnknown)
	}
	return nil
}

// agentFlagSet is the agent's flag set, bound to f; hack/refdocs lists it
// in docs/reference/flags.md.
func agentFlagSet(f *agentFlags, help io.Writer) *pflag.FlagSet {
	fs := newFlagSet("agent", "warmer agent keeps the images that ImageWarms ask of this node present in its container runtime.", help)
	f.bind(fs)
	return fs
}

func runAgent(args []string, help io.Writer) error {
	var f agentFlags
	fs := agentFlagSet(&f, help)
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := f.validate(); err != nil {
		return err
	}
	if err := f.credProviders.load(); err != nil {
		return err
	}
	cfg, err := f.restConfig()
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	tuneRuntime(f.pprofAddr)
	limitMemory()
	// The engine and the CRI client log through the context's logger:
	// they are libraries and know nothing of controller-runtime's.
	ctx := logr.NewContext(ctrl.SetupSignalHandler(), ctrl.Log)
	cri, err := connectCRI(ctx, f.criEndpoint, f.criTimeout)
	if err != nil {
		return err
	}
	defer cri.Close()
	mgr, err := newAgentManager(cfg, &f)
	if err != nil {
		return err
	}
	if err := setupAgent(ctx, mgr, cri, &f); err != nil {
		return err
	}
	ctrl.Log.Info("Starting agent", "version", version, "node", f.nodeName, "runtime", cri.Endpoint())
	return mgr.Start(ctx)
}

// agentGCPercent is the agent's GOGC unless the environment sets one. The
// agent idles on a small heap on every node: a tighter heap goal keeps its
// resident memory down (docs/performance.md) for garbage collection work
// it can afford, as it allocates little between passes. A
// memory limit is left to the deployer (GOMEMLIMIT from the container's
// limit): a fixed one could make a node with many images collect
// without pause.
const agentGCPercent = 50

// tuneRuntime sets the agent's GOGC and, unless profiles are served
// (--pprof-bind-address), turns off heap profiling: its sampling keeps a
// table of the stacks it saw, which grows with every new one and which
// nothing reads without the profile endpoint.
func tuneRuntime(pprofAddr string) {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(agentGCPercent)
	}
	if pprofAddr == "" || pprofAddr == "0" {
		runtime.MemProfileRate = 0
	}
}

// connectCRI connects to the runtime, retrying while it does not answer:
// on a booting node the agent may start before containerd. A malformed
// --container-runtime-endpoint is reported at once: no retry cures it.
func connectCRI(ctx context.Context, endpoint string, timeout time.Duration) (*criclient.Client, error) {
	for delay := time.Second; ; delay = min(2*delay, 30*time.Second) {
		cri, err := criclient.New(ctx, criclient.Config{Endpoint: endpoint, Timeout: timeout})
		switch {
		case err == nil:
			return cri, nil
		case errors.Is(err, criclient.ErrInvalidEndpoint):
			return nil, usageError{fmt.Errorf("--container-runtime-endpoint: %w", err)}
		}
		ctrl.Log.Error(err, "Container runtime not reachable; retrying", "endpoint", endpoint, "in", delay)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("connecting to the container runtime: %w", err)
		case <-time.After(delay):
		}
	}
}

func newAgentManager(cfg *rest.Config, f *agentFlags) (ctrl.Manager, error) {
	return ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 agentScheme(),
		Metrics:                f.metricsOptions(),
		HealthProbeBindAddress: f.probeAddr,
		PprofBindAddress:       f.pprofAddr,
		Cache:                  agent.CacheOptions(f.nodeName),
		Client:                 agent.ClientOptions(),
	})
}

func setupAgent(ctx context.Context, mgr ctrl.Manager, cri *criclient.Client, f *agentFlags) error {
	a := &agent.NodeAgent{
		Client:           mgr.GetClient(),
		APIReader:        mgr.GetAPIReader(),
		SecretNamespace:  f.secretNamespace,
		Recorder:         mgr.GetEventRecorder("warmer-agent"),
		NodeName:         f.nodeName,
		Runtime:          runtimeInfo(cri),
		ResyncPeriod:     f.resync,
		StatusLimiter:    flowcontrol.NewTokenBucketRateLimiter(float32(f.statusQPS), f.statusBurst),
		ProgressInterval: f.progressInterval,
		PerImageEvents:   f.perImageEvents,
		// Bytes alone are written at most this often.
		PullProgressInterval: f.bytesInterval,
		ServedInterval:       f.servedInterval,
		RetryInterval:        f.retryInterval,
		// An image the node keeps removing is pulled again no more often
		// than a failing one.
		EvictionBackOffInitial: f.backOffInitial,
		EvictionBackOffMax:     f.backOffMax,
		Verification:           f.verification,
		Clock:                  binaryClock,
		Containers:             cri,
		AfterPass:              (&memoryReturner{quiet: returnMemoryQuiet, minFree: returnMemoryMinFree, spacing: returnMemorySpacing}).kick,
	}
	a.StartupTaintKey, a.StartupTaintDeadline = f.startupTaint, f.taintDeadline
	a.NodeSignals = f.nodeSignals
	setPinner(ctx, a, cri)
	setMarker(ctx, a, cri)
	imageFs, err := f.kubelet.imageFsReader(mgr.GetConfig())
	if err != nil {
		return err
	}
	opts := pullengine.Options{
		SerializePulls:       f.serialize,
		MaxParallelPulls:     f.maxParallel,
		RegistryQPS:          float32(f.registryQPS),
		RegistryBurst:        f.registryBurst,
		BackOffInitial:       f.backOffInitial,
		BackOffMax:           f.backOffMax,
		BackOffJitter:        f.backOffJitter,
		PullTimeout:          f.pullTimeout,
		LargePullBytes:       f.largePullBytes,
		DiskThresholdPercent: f.diskThreshold,
		HoldWhenLevelUnknown: f.diskUnknown == "hold",
		ImageFs:              imageFs,
		Listener:             a.Listener(),
		Registerer:           ctrlmetrics.Registry,
		Clock:                binaryClock,
		StallTimeout:         f.stallTimeout,
		Yield:                pullengine.YieldMode(f.yield),
	}
	setContent(ctx, a, &opts, cri)
	if ps := f.credProviders.loaded; ps != nil {
		opts.Credentials, a.CredentialProviders = ps, ps.Names()
		f.credProviders.logProviders()
	}
	engine := pullengine.New(cri, opts)
	a.Engine = engine
	if err := mgr.Add(loggedEngine{Engine: engine, log: ctrl.Log}); err != nil {
		return err
	}
	if err := a.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the agent: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	// Not ready while the runtime does not answer: the agent can do nothing.
	return mgr.AddReadyzCheck("cri", func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), 2*time.Second)
		defer cancel()
		_, err := cri.Version(ctx)
		return err
	})
}

// setContent gives the engine the runtime's content store, to follow the
// bytes of pulls, or tells the agent why there is none: pulls go on
// without progress or stall detection.
func setContent(ctx context.Context, a *agent.NodeAgent, opts *pullengine.Options, cri *criclient.Client) {
	store, err := cri.ContentStore(ctx)
	if err != nil {
		a.ContentUnable = err.Error()
		ctrl.Log.Info("The bytes of pulls cannot be seen on this node", "reason", err.Error())
		return
	}
	opts.Content = store
	snaps, err := cri.Snapshots(ctx)
	if err != nil {
		ctrl.Log.Info("What pulls unpack cannot be measured on this node; the image filesystem's level alone stops an unpack that outgrows the room", "reason", err.Error())
		return
	}
	opts.Snapshots = snaps
}

// setPinner gives the agent the runtime's pinner, or the reason there is
// none: the warm goes on without pins.
func setPinner(ctx context.Context, a *agent.NodeAgent, cri *criclient.Client) {
	pinner, err := cri.Pinner(ctx)
	if err != nil {
		a.PinUnable = err.Error()
		ctrl.Log.Info("Images cannot be pinned on this node", "reason", err.Error())
		return
	}
	a.Pinner = pinner
}

// setMarker gives the agent the runtime's marker, or the reason there is
// none: images the agent pulled with pull secrets are then remembered only
// in its memory and its NodeWarm.
func setMarker(ctx context.Context, a *agent.NodeAgent, cri *criclient.Client) {
	marker, err := cri.Marker(ctx)
	if err != nil {
		a.MarkUnable = err.Error()
		ctrl.Log.Info("Images pulled with pull secrets cannot be marked on this node", "reason", err.Error())
		return
	}
	a.Marker = marker
}

func runtimeInfo(cri *criclient.Client) warmv1.RuntimeInfo {
	info := warmv1.RuntimeInfo{Endpoint: cri.Endpoint()}
	if v := cri.RuntimeVersion(); v != nil {
		info.Name, info.Version = v.RuntimeName, v.RuntimeVersion
	}
	return info
}

// loggedEngine starts the engine with the binary's logger in its context:
// the manager starts runnables with a context that carries none, and the
// engine logs every pull (started, pulled, failed, cancelled) through the
// one it is started with.
type loggedEngine struct {
	*pullengine.Engine
	log logr.Logger
}

// Start runs the engine until ctx ends.
func (l loggedEngine) Start(ctx context.Context) error {
	return l.Engine.Start(logr.NewContext(ctx, l.log))
}
