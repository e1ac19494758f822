#!/usr/bin/env bash
# Builds what the test bed's real node runs and Debian does not package in
# the versions it needs: kubelet, kube-controller-manager and kube-scheduler
# (Kubernetes, from the Go module proxy, the way install-envtest-assets.sh
# builds kube-apiserver) and containerd 2.x with its runc shim and ctr. They
# go to a versioned folder of the cache, outside the repo.
#
#   hack/install-node-assets.sh            # prints the folder last
#   PATH=$(hack/install-node-assets.sh):$PATH
#
# runc, the CNI plugins, iptables and conntrack come from the distribution:
# hack/install-testbed-deps.sh. A binary whose version already matches is
# kept, so a second run costs nothing. Progress goes to stderr; stdout
# carries only the folder.
set -euo pipefail

LOG_PREFIX=node-assets
# shellcheck source=hack/lib/gobuild.sh
. "$(dirname "$0")/lib/gobuild.sh"
CACHE_ROOT="${WARMER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/warmer}"
DEST="${1:-$CACHE_ROOT/node/k8s-$K8S_VERSION-containerd-$CONTAINERD_VERSION}"
command -v go >/dev/null || { say "go is not on PATH"; exit 1; }

mkdir -p "$DEST"
DEST="$(cd "$DEST" && pwd)"
tmp="$(mktemp -d "${TMPDIR:-/tmp}/warmer-node-assets.XXXXXX")"
trap '[ -n "${KEEP_TMP:-}" ] || rm -rf "$tmp"' EXIT

# The Kubernetes binaries: one `go build` for all that are missing, so the
# packages they share compile once. The link of each takes about 2.5 GB of
# memory; -p 2 keeps at most two at a time.
k8s=()
for cmd in kubelet kube-controller-manager kube-scheduler; do
	if version_is "$DEST/$cmd" "Kubernetes $K8S_VERSION" --version; then
		say "$cmd $K8S_VERSION present"
	else
		k8s+=("$cmd")
	fi
done
if [ ${#k8s[@]} -gt 0 ]; then
	bed_module "$tmp/bed"
	say "building ${k8s[*]} $K8S_VERSION (several minutes on a cold cache)"
	mkdir -p "$tmp/out"
	(cd "$tmp/bed" && timed go build -p 2 -trimpath -ldflags "$K8S_LDFLAGS" -o "$tmp/out/" \
		"${k8s[@]/#/k8s.io/kubernetes/cmd/}")
	for cmd in "${k8s[@]}"; do mv -f "$tmp/out/$cmd" "$DEST/$cmd"; done
fi

# The tags leave out snapshotters that need cgo.
if version_has "$DEST/containerd" "containerd $CONTAINERD_MODULE $CONTAINERD_VERSION" --version &&
	[ -x "$DEST/containerd-shim-runc-v2" ] && [ -x "$DEST/ctr" ]; then
	say "containerd $CONTAINERD_VERSION present"
else
	bed_module "$tmp/bed"
	say "building containerd, containerd-shim-runc-v2 and ctr $CONTAINERD_VERSION"
	mkdir -p "$tmp/bin"
	# The version line containerd prints comes from these; without them it
	# says "2.4.2+unknown".
	(cd "$tmp/bed" && timed go build -p 2 -trimpath -tags no_btrfs,no_devmapper,no_zfs \
		-ldflags "-s -w -X $CONTAINERD_MODULE/version.Version=$CONTAINERD_VERSION" -o "$tmp/bin/" \
		"$CONTAINERD_MODULE/cmd/containerd" "$CONTAINERD_MODULE/cmd/containerd-shim-runc-v2" \
		"$CONTAINERD_MODULE/cmd/ctr")
	# containerd last: its version is what marks the set complete.
	for cmd in containerd-shim-runc-v2 ctr containerd; do mv -f "$tmp/bin/$cmd" "$DEST/$cmd"; done
fi
echo "$DEST"
