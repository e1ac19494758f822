# warmer's image: one static binary on distroless, for both roles
# (`warmer agent`, `warmer controller`). Build with `make docker-build`.

# The builder runs on the build machine's platform and cross-compiles, so a
# multi-platform build (docker buildx --platform) needs no emulation.
FROM --platform=$BUILDPLATFORM golang:1.26 AS builder
ARG TARGETOS
ARG TARGETARCH
ARG VERSION=dev
WORKDIR /src
# Modules first: this layer is reused until go.mod or go.sum change.
COPY go.mod go.sum ./
RUN go mod download
COPY api/ api/
COPY cmd/ cmd/
COPY controllers/ controllers/
COPY internal/ internal/
COPY pkg/ pkg/
# Static (no libc in the final image), reproducible paths, stamped version.
RUN CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/warmer ./cmd/warmer

# No shell, no package manager; uid 65532 by default. The agent's
# DaemonSet overrides the user (see config/daemonset/agent_daemonset.yaml).
FROM gcr.io/distroless/static:nonroot
COPY --from=builder /out/warmer /warmer
USER 65532:65532
ENTRYPOINT ["/warmer"]
