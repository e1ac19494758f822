package scale

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/controllers/agent"
	"github.com/warmer-dev/warmer/pkg/pullengine"
)

// Options shape the simulated agents. The agent settings are the
// defaults of `warmer agent`.
type Options struct {
	// Config is each node's agent's identity on the API server: its own
	// credentials (a real agent's Pod-bound token names its node, which
	// warmer's admission policies read), and the client-side rate limit a
	// real agent has (cmd/warmer: none, QPS -1, leaving it to the
	// server's priority and fairness).
	Config func(node string) *rest.Config
	// Scheme knows warmer's types and the built-in ones.
	Scheme *runtime.Scheme
	// PullLatency is how long each fake pull takes.
	PullLatency time.Duration
	// NoEvents leaves the agents without an event recorder: an
	// experiment, to tell what events cost the API server.
	NoEvents bool
	// Gauge, if set, counts every runtime's pulls in flight.
	Gauge *PullGauge
	// Missing, if set, says which references the registry does not have:
	// their pulls fail as containerd's do, NotFound.
	Missing func(ref string) bool
	// NodeSignals has each agent keep its Node's warm labels and
	// ImagesWarm condition, as `warmer agent` does by default
	// (--node-signals); off, the fleet's Nodes are not written.
	NodeSignals bool
}

// Fleet is a set of running simulated agents.
type Fleet struct {
	// Runtimes are the agents' fake runtimes, by node name.
	Runtimes map[string]*FakeRuntime
	// Answers counts the API server's answers to the agents by status.
	Answers *Answers

	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	errs   []error
}

// Start runs one simulated agent per node name, each with its own
// manager (cache, client, event recorder), as each would have in its own
// Pod. Stop ends them.
func Start(opts Options, nodes []string) (*Fleet, error) {
	ctx, cancel := context.WithCancel(context.Background())
	f := &Fleet{Runtimes: map[string]*FakeRuntime{}, Answers: &Answers{}, cancel: cancel}
	for _, node := range nodes {
		cfg := f.Answers.wrap(opts.Config(node))
		mgr, rt, err := newAgent(opts, cfg, node)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("agent %s: %w", node, err), f.Stop())
		}
		f.Runtimes[node] = rt
		f.wg.Go(func() {
			if err := mgr.Start(ctx); err != nil {
				f.mu.Lock()
				f.errs = append(f.errs, fmt.Errorf("agent %s: %w", node, err))
				f.mu.Unlock()
			}
		})
	}
	return f, nil
}

// Stop stops every agent and returns the errors they ended with.
func (f *Fleet) Stop() error {
	f.cancel()
	f.wg.Wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	return errors.Join(f.errs...)
}

// newAgent wires one agent the way cmd/warmer's setupAgent does, with a
// fake runtime in place of the CRI client, no metrics or probe listeners
// (a thousand would need a thousand ports) and no leader election (an
// agent has none).
func newAgent(opts Options, cfg *rest.Config, node string) (ctrl.Manager, *FakeRuntime, error) {
	skip := true // every agent names its controller "agent", as each Pod does
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 opts.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  agent.CacheOptions(node),
		Client:                 agent.ClientOptions(),
		Controller:             config.Controller{SkipNameValidation: &skip},
	})
	if err != nil {
		return nil, nil, err
	}
	rt := NewFakeRuntime(opts.PullLatency, 20<<20)
	rt.Gauge, rt.Missing = opts.Gauge, opts.Missing
	var rec recorder.EventRecorder
	if !opts.NoEvents {
		rec = mgr.GetEventRecorder("warmer-agent")
	}
	a := &agent.NodeAgent{
		Client:           mgr.GetClient(),
		APIReader:        mgr.GetAPIReader(),
		Recorder:         rec,
		NodeName:         node,
		Runtime:          warmv1.RuntimeInfo{Name: "fake", Version: "0", Endpoint: "memory"},
		ResyncPeriod:     time.Minute,
		StatusLimiter:    flowcontrol.NewTokenBucketRateLimiter(0.5, 5),
		ProgressInterval: 2 * time.Second,
		RetryInterval:    time.Minute,
		// As cmd/warmer's defaults: a Node registered with the taint
		// loses it once warm, by a patch warmer's policy checks.
		StartupTaintKey:      agent.DefaultStartupTaintKey,
		StartupTaintDeadline: agent.DefaultStartupTaintDeadline,
		NodeSignals:          opts.NodeSignals,
	}
	// The disk guard is off: the fake runtime's images take no disk, and
	// the "/" it reports is this machine's shared disk, whose fill (past
	// 80 % once, under a cold build cache, which stopped every pull) says
	// nothing about the control plane the fleet measures.
	engine := pullengine.New(rt, pullengine.Options{
		MaxParallelPulls: 3, RegistryQPS: 5, RegistryBurst: 10, DiskThresholdPercent: 100, Listener: a.Listener(),
	})
	a.Engine = engine
	if err := mgr.Add(engine); err != nil {
		return nil, nil, err
	}
	if err := a.SetupWithManager(mgr); err != nil {
		return nil, nil, err
	}
	return mgr, rt, nil
}
