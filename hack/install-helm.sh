#!/usr/bin/env bash
# Builds the helm CLI from the Go module proxy into a versioned folder of the
# cache, outside the repo, and prints that folder on stdout (progress goes
# to stderr). The chart's tests (test/chart) drive it as a user would.
#
#   PATH="$PATH:$(hack/install-helm.sh)"
#   hack/install-helm.sh --check   # prints the folder if helm is built, fails if not; never builds
#
# helm is built from the throwaway module the other install scripts use
# (hack/lib/gobuild.sh) rather than required by this project's go.mod: as a
# dependency it would bring hundreds of packages into the main module. The
# shared module also means most of helm's packages (Kubernetes' client
# libraries) are already compiled when kube-apiserver was.
# A binary that already reports the wanted version is kept, so a second run
# costs nothing.
set -euo pipefail

LOG_PREFIX=install-helm
# shellcheck source=hack/lib/gobuild.sh
. "$(dirname "$0")/lib/gobuild.sh"
CACHE_ROOT="${WARMER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/warmer}"
DEST="$CACHE_ROOT/helm/$HELM_VERSION"

if [ -x "$DEST/helm" ] && [ "$("$DEST/helm" version --template '{{.Version}}' 2>/dev/null)" = "$HELM_VERSION" ]; then
	say "helm $HELM_VERSION present"
	echo "$DEST"
	exit 0
fi
if [ "${1:-}" = --check ]; then
	say "no helm $HELM_VERSION in $DEST: run make testbed"
	exit 1
fi
command -v go >/dev/null || { say "go is not on PATH"; exit 1; }

mkdir -p "$DEST"
tmp="$(mktemp -d "${TMPDIR:-/tmp}/warmer-helm.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
bed_module "$tmp/bed"
say "building helm $HELM_VERSION (a few minutes on a cold cache)"
# The version is stamped the way helm's own Makefile does; without it the
# binary calls itself by its minor version only.
(cd "$tmp/bed" && timed go build -trimpath \
	-ldflags "-s -w -X $HELM_MODULE/internal/version.version=$HELM_VERSION -X $HELM_MODULE/internal/version.gitTreeState=clean" \
	-o "$DEST/.helm.new" "$HELM_MODULE/cmd/helm")
mv -f "$DEST/.helm.new" "$DEST/helm"
echo "$DEST"
