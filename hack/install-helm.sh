#!/usr/bin/env bash
# Builds the helm CLI from the Go module proxy into a versioned folder of the
# cache, outside the repo, and prints that folder on stdout (progress goes
# to stderr). The chart's tests (test/chart) drive it as a user would.
#
#   PATH="$PATH:$(hack/install-helm.sh)"
#   hack/install-helm.sh --check   # prints the folder if helm is built, fails if not; never builds
#
# helm is built on its own rather than required by this project's go.mod:
# as a dependency it would bring hundreds of packages into the main module.
# A binary that already reports the wanted version is kept, so a second run
# costs nothing.
set -euo pipefail

HELM_VERSION="${HELM_VERSION:-v4.3.1}"
CACHE_ROOT="${WARMER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/warmer}"
DEST="$CACHE_ROOT/helm/$HELM_VERSION"

say() { echo "[install-helm] $*" >&2; }

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

# helm's module path carries its major version (helm.sh/helm/v4).
major="${HELM_VERSION%%.*}"
module="helm.sh/helm/$major"
mkdir -p "$DEST"
tmp="$(mktemp -d "$DEST/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
say "building helm $HELM_VERSION (a few minutes on a cold cache)"
# The version is stamped the way helm's own Makefile does; without it the
# binary calls itself by its minor version only. This project's go.work and
# flags must not reach the build.
GOWORK=off GOFLAGS= CGO_ENABLED=0 GOBIN="$tmp" go install -trimpath \
	-ldflags "-s -w -X $module/internal/version.version=$HELM_VERSION -X $module/internal/version.gitTreeState=clean" \
	"$module/cmd/helm@$HELM_VERSION"
mv -f "$tmp/helm" "$DEST/helm"
echo "$DEST"
