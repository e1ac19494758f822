package pullengine

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"
)

// DefaultPullTimeout bounds a pull that has started. The kubelet has no
// such bound; a warmer needs one, or a stuck pull holds its slot forever.
// It is generous because multi-gigabyte images on slow links are real.
const DefaultPullTimeout = 30 * time.Minute

// DefaultProgressInterval is how often the content store is read while
// pulls run.
const DefaultProgressInterval = time.Second

// DefaultStallTimeout is the agent's stall timeout: long enough for a
// registry that pauses between layers, far shorter than the pull timeout.
const DefaultStallTimeout = 2 * time.Minute

// Options configure an Engine. The zero value is usable; see each field
// for its default.
type Options struct {
	// SerializePulls runs one pull at a time, like the kubelet's
	// --serialize-image-pulls.
	SerializePulls bool
	// MaxParallelPulls caps parallel pulls when not serialised, like
	// --max-parallel-image-pulls; < 1 means no cap (the kubelet's meaning),
	// so set it.
	MaxParallelPulls int
	// RegistryQPS and RegistryBurst limit how often pulls start, like
	// --registry-qps and --registry-burst; QPS 0 means no limit.
	RegistryQPS   float32
	RegistryBurst int
	// BackOffInitial and BackOffMax shape per-image back-off; 0 means 10s
	// and 300s.
	BackOffInitial time.Duration
	BackOffMax     time.Duration
	// BackOffJitter is the largest share of each back-off taken off at
	// random, so that nodes failing together do not retry together: a wait
	// falls evenly between (1-BackOffJitter) and 1 times the kubelet's.
	// 0 keeps the kubelet's exact schedule (the agent passes
	// DefaultBackOffJitter); values are clamped to [0, MaxBackOffJitter].
	BackOffJitter float64
	// PullTimeout bounds each pull once started, unless the request sets
	// its own: for each started gigabyte of the image once its size is
	// known (sizes.go); 0 means DefaultPullTimeout.
	PullTimeout time.Duration
	// LargePullBytes is the compressed size from which an image's pull
	// gives its slot to a smaller image's waiting pull when large pulls
	// hold every slot (sizes.go); 0 means DefaultLargePullBytes, < 0
	// never.
	LargePullBytes int64
	// DiskThresholdPercent stops new pulls while the image filesystem is
	// fuller than this; 0 means 80, 100 or more disables the guard.
	DiskThresholdPercent int
	// HoldWhenLevelUnknown makes the disk guard hold new pulls while it
	// cannot read the image filesystem's level; false lets them through
	// unchecked. The agent holds by default (--image-fs-unknown): one
	// ImageWarm must not fill a disk nobody measures. Either way
	// DiskUsage says the level is unknown.
	HoldWhenLevelUnknown bool
	// DiskCheckInterval is how long a disk reading is reused; 0 means 10s.
	DiskCheckInterval time.Duration
	// ImageFs, when set, is asked first for the image filesystem's size
	// and free space, so the guard needs no view of that filesystem (the
	// agent asks the kubelet); when it fails, the guard measures the
	// runtime's mountpoint with statfs. nil means statfs only.
	ImageFs ImageFsReader
	// Credentials supplies node-wide logins (credential-provider
	// plugins) for each pull, tried after the request's keyring; nil
	// means none.
	Credentials CredentialProvider
	// Content is the runtime's content store, read to follow the bytes
	// of pulls under way (Status.Progress) and to catch stalled ones; nil
	// means no view: no progress, no stall detection.
	Content ContentView
	// Snapshots is the runtime's snapshots, read when pulls unpack past
	// the room, and the disk grew more than they were admitted for, to
	// tell whether they or someone else took it (needs Content); nil
	// means such pulls are cancelled.
	Snapshots SnapshotView
	// ProgressInterval is how often Content is read while pulls run; 0
	// means 1s.
	ProgressInterval time.Duration
	// StallTimeout cancels a pull whose bytes have not moved for this
	// long, with class Stalled; 0 means never. Only a pull whose manifest
	// Content shows can stall: before that the engine does not know what
	// it fetches, and PullTimeout alone bounds it.
	StallTimeout time.Duration
	// Yield is what the engine does while the runtime pulls blobs none
	// of its pulls fetch (the kubelet, for a starting Pod); it needs
	// Content. "" means YieldOff.
	Yield YieldMode
	// Listener hears about pulls; nil means nobody. One that is also a
	// YieldListener hears when the engine starts and stops yielding.
	Listener Listener
	// Registerer is where the engine's metrics are registered (the agent
	// passes controller-runtime's metrics.Registry); nil means nowhere.
	// Engines sharing one share its metrics.
	Registerer prometheus.Registerer
	// Clock is for tests; nil means the real clock.
	Clock clock.WithDelayedExecution

	// statfs is for tests; nil means statfs(2).
	statfs statfsFunc
}

// withDefaults fills in zero fields.
func (o Options) withDefaults() Options {
	o.BackOffInitial = orDefault(o.BackOffInitial, DefaultBackOffInitial)
	o.BackOffMax = orDefault(o.BackOffMax, DefaultBackOffMax)
	o.PullTimeout = orDefault(o.PullTimeout, DefaultPullTimeout)
	o.DiskCheckInterval = orDefault(o.DiskCheckInterval, DefaultDiskCheckInterval)
	o.ProgressInterval = orDefault(o.ProgressInterval, DefaultProgressInterval)
	if o.LargePullBytes == 0 {
		o.LargePullBytes = DefaultLargePullBytes
	}
	if o.Yield == "" {
		o.Yield = YieldOff
	}
	if o.DiskThresholdPercent <= 0 {
		o.DiskThresholdPercent = DefaultDiskThresholdPercent
	}
	if o.Listener == nil {
		o.Listener = ListenerFuncs{}
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.statfs == nil {
		o.statfs = statfs
	}
	return o
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}
