// Package pullengine pulls container images through a node's CRI image
// service the way the kubelet does, for an agent that keeps images warm.
// It holds no Kubernetes API types: callers pass references, priorities,
// timeouts and docker config content; CRI types appear only at the image
// service boundary.
//
// # Use
//
//	eng := pullengine.New(criClient, pullengine.Options{MaxParallelPulls: 3, Listener: l})
//	go eng.Start(ctx)                        // or mgr.Add(eng)
//	present, _ := eng.Presence(ctx)          // one ListImages per pass
//	for each wanted image not present (or due a refresh):
//	    reqs = append(reqs, pullengine.Request{Image: img, Priority: p, Keyring: kr})
//	statuses := eng.Sync(ctx, reqs)          // queue these, cancel the rest
//
// Results arrive through the Listener (and Status); a BackOff or disk
// pressure status carries RetryAt for the caller's requeue.
//
// # Parts, one file each
//
//   - outcome.go: the reports' types, kept in package pull (plain data a
//     reader needs no CRI for) and named again here. References are
//     normalised by package imageref (docker.io and library/ filled in,
//     ":latest" only when there is neither tag nor digest; tag+digest is
//     pulled by digest).
//   - presence.go: an index of one ListImages answer by repo tag and repo
//     digest.
//   - puller.go, serial.go, parallel.go: how many pulls run at once.
//   - queue.go: which pull is next (priority, then turn, then arrival);
//     turns.go: the shares of one priority take turns.
//   - repo.go: one pull per repository at a time, so that one image named
//     by tag and by digest is pulled once.
//   - throttle.go: registry QPS/burst as a decorator of the image service.
//   - backoff.go: per-image exponential back-off keyed on reference and
//     credentials.
//   - classify.go: failure classes from gRPC code and runtime message.
//   - dockerconfig.go, keyring.go, credential.go: pull secrets to ordered
//     login candidates, never printable.
//   - diskguard.go: no new pulls while the image filesystem is too full.
//   - engine.go, job.go, finish.go, status.go: the engine itself.
//   - progress.go, watch.go: the bytes of running pulls, read in the
//     runtime's content store (Options.Content) every second, in
//     Status.Progress; a pull whose bytes stop for Options.StallTimeout
//     is cancelled as Stalled.
//   - metrics.go: Prometheus metrics, on the registry Options.Registerer
//     names.
//
// # Semantics worth knowing
//
// One job per normalised reference: "nginx", "library/nginx" and
// "docker.io/library/nginx:latest" share one pull, reported under the
// spelling first requested; "nginx:1.27@sha256:..." and "nginx@sha256:..."
// share one too. A tag and a digest of one image are two jobs, but pulls of
// one repository run one at a time, tag first, and the digest's job then
// finishes from the runtime's record without a PullImage call (repo.go). Credentials are tried most specific first, the
// next only after an Unauthorized; with none, the pull is anonymous.
// AuthConfig.ServerAddress is left empty (containerd rejects a bare
// host:port). Back-off applies to runtime failures, not to cancellations,
// disk pressure or invalid names. The image filesystem's size comes from
// Options.ImageFs when set (the agent's is the kubelet), else from statfs
// on the mountpoint ImageFsInfo reports; when neither can be read, the disk
// guard lets pulls through.
package pullengine
