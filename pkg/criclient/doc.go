// Package criclient is the agent's client for a node's CRI image service
// (containerd, CRI-O, cri-dockerd): socket discovery, one gRPC connection
// checked with Version at start, a timeout on every call except PullImage,
// and errors that keep the runtime's gRPC status and name the call.
//
// # Why the generated client and not k8s.io/cri-client
//
// Two kept options exist: k8s.io/cri-client's remote image service (what the
// kubelet uses) and the generated runtimeapi.ImageServiceClient from
// k8s.io/cri-api over grpc.NewClient. This package uses the generated clients,
// plus cri-client's small pkg/util (endpoint parsing and the unix dialer, so
// an endpoint means exactly what it means to the kubelet). The remote image
// service was evaluated and set aside because:
//
//   - it has no Version call; that lives on cri-client's runtime service,
//     which would dial a second connection to the same socket;
//   - it logs every failed call at error level (a pull of a missing tag
//     included) and then returns the error, so each failure would be
//     reported twice and callers cannot quieten expected ones;
//   - it turns PullImage errors with code Unknown into plain errors, dropping
//     the gRPC status, and uses its connection timeout as the timeout of
//     every call;
//   - it brings OpenTelemetry's gRPC instrumentation into the build, which
//     the agent does not use.
//
// It does not log AuthConfig (only the image name), so secrets were not the
// reason. What it does that matters, this package does too: a unix-socket
// dialer, a 16 MiB receive limit, timeouts on everything except PullImage
// (which a deadline would abort cleanly mid-download, so it is bounded by the
// caller's context only), and a check of the connection at start.
//
// # Behaviour worth knowing
//
// Outside CRI, on containerd only and over the same connection: pin.go
// sets the label containerd's CRI plugin reads as "pinned"; content.go
// reads the content store (blobs being written, a repository's manifests,
// a blob's info and small blobs), which shows a pull's bytes as they
// arrive.
//
// Empty image references are rejected here, before any call: with exactly one
// image present, containerd's ImageStatus matches "" as an ID prefix and
// returns that image, and RemoveImage of "" could remove it. ImageStatus of
// an absent image returns (nil, nil). AuthConfig is passed through untouched;
// callers should leave ServerAddress empty (containerd rejects a bare
// host:port there and silently drops credentials whose address differs).
package criclient
