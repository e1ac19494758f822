#!/usr/bin/env bash
# Builds the control-plane binaries envtest needs (kube-apiserver and etcd) from
# the Go module proxy and caches them in a versioned folder outside the repo.
# setup-envtest's download site is not reachable on every machine; the module
# proxy is, so we compile instead of downloading.
#
#   hack/install-envtest-assets.sh            # prints the asset folder last
#   KUBEBUILDER_ASSETS=$(hack/install-envtest-assets.sh)
#
# kubectl is built too when none is on PATH (the tests drive it).
# A binary whose --version already matches is kept, so a second run costs
# nothing. Progress goes to stderr; stdout carries only the folder.
set -euo pipefail

LOG_PREFIX=envtest-assets
# shellcheck source=hack/lib/gobuild.sh
. "$(dirname "$0")/lib/gobuild.sh"
CACHE_ROOT="${WARMER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/warmer}"
DEST="${1:-$CACHE_ROOT/envtest/k8s-$K8S_VERSION-etcd-$ETCD_VERSION}"
command -v go >/dev/null || { say "go is not on PATH"; exit 1; }

mkdir -p "$DEST"
DEST="$(cd "$DEST" && pwd)"

tmp="$(mktemp -d "${TMPDIR:-/tmp}/warmer-assets.XXXXXX")"
trap '[ -n "${KEEP_TMP:-}" ] || rm -rf "$tmp"' EXIT

build_k8s_cmd() { # kube-apiserver | kubectl
	bed_module "$tmp/bed"
	say "building $1 $K8S_VERSION (a few minutes on a cold cache)"
	(cd "$tmp/bed" && timed go build -trimpath -ldflags "$K8S_LDFLAGS" -o "$DEST/.$1.new" "k8s.io/kubernetes/cmd/$1")
	mv -f "$DEST/.$1.new" "$DEST/$1"
}

build_etcd() {
	bed_module "$tmp/bed"
	say "building etcd $ETCD_VERSION"
	(cd "$tmp/bed" && timed go build -trimpath -ldflags "-s -w" -o "$DEST/.etcd.new" "$ETCD_MODULE")
	mv -f "$DEST/.etcd.new" "$DEST/etcd"
}

if version_is "$DEST/kube-apiserver" "Kubernetes $K8S_VERSION" --version; then
	say "kube-apiserver $K8S_VERSION present"
else
	build_k8s_cmd kube-apiserver
fi
if version_is "$DEST/etcd" "etcd Version: ${ETCD_VERSION#v}" --version; then
	say "etcd $ETCD_VERSION present"
else
	build_etcd
fi
# The tests drive kubectl as a user would. Most machines have one; where
# none is on PATH, build the matching client into the same folder.
if ! command -v kubectl >/dev/null && ! version_is "$DEST/kubectl" "Client Version: $K8S_VERSION" version --client; then
	build_k8s_cmd kubectl
fi
echo "$DEST"
