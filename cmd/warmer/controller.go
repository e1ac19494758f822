package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/pflag"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/warmer-dev/warmer/controllers"
)

// controllerFlags are the status controller's settings.
type controllerFlags struct {
	commonFlags
	leaderElect      bool
	leaderNamespace  string
	minWriteInterval time.Duration
}

func (f *controllerFlags) bind(fs *pflag.FlagSet) {
	fs.BoolVar(&f.leaderElect, "leader-elect", true, "Elect a leader among replicas, so only one writes ImageWarm status.")
	fs.StringVar(&f.leaderNamespace, "leader-election-namespace", "", "Namespace of the leader election Lease; empty: the Pod's own namespace.")
	fs.DurationVar(&f.minWriteInterval, "min-status-interval", time.Second, "Least time between two progress writes of one ImageWarm's status; a settled result (no node pulling or yet to report) is written at once, and the last state always is.")
	f.commonFlags.bind(fs, ":8080", ":8081")
}

func runController(args []string, help io.Writer) error {
	var f controllerFlags
	fs := newFlagSet("controller", "warmer controller sums up the nodes' NodeWarm reports in each ImageWarm's status.", help)
	f.bind(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := positive("min-status-interval", f.minWriteInterval); err != nil {
		return err
	}
	cfg, err := f.restConfig()
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme(),
		Metrics:                 metricsserver.Options{BindAddress: f.metricsAddr},
		HealthProbeBindAddress:  f.probeAddr,
		PprofBindAddress:        f.pprofAddr,
		LeaderElection:          f.leaderElect,
		LeaderElectionID:        "warmer-controller.warmer.dev",
		LeaderElectionNamespace: f.leaderNamespace,
		// A successor takes over without waiting out the lease.
		LeaderElectionReleaseOnCancel: true,
		// Longer than the usual 15 s/10 s: the lease requests share the
		// API server's service-account priority level with every agent,
		// and a thousand agents starting a warm at once queued a renewal
		// past 10 s (test/perf BenchmarkScale), which ends the process.
		// Status aggregation can wait a minute for a successor.
		LeaseDuration: ptr(60 * time.Second),
		RenewDeadline: ptr(40 * time.Second),
		RetryPeriod:   ptr(5 * time.Second),
		Cache:         cache.Options{DefaultTransform: cache.TransformStripManagedFields()},
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	r := &controllers.ImageWarmReconciler{Client: mgr.GetClient(), MinWriteInterval: f.minWriteInterval}
	if err := r.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the controller: %w", err)
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

func ptr[T any](v T) *T { return &v }
