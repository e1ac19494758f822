#!/usr/bin/env bash
# Builds CRI-O, the second runtime the test bed runs (test/crio): crio from
# the Go module proxy (Debian has no cri-o package) and its small C helper
# pinns, into a versioned folder of the cache, outside the repo. conmon and
# runc come from Debian (hack/install-testbed-deps.sh).
#
#   hack/install-crio.sh            # prints the folder last
#
# The proxy refuses CRI-O's version list but serves the exact version, so
# it is downloaded by version and built where the module cache holds it
# (nothing is written there). The tags leave out every part that needs a C
# library beyond libc (gpgme, btrfs, devicemapper, ostree, seccomp): the
# bed pulls images and runs no untrusted container. A crio whose version
# matches is kept, so a second run costs nothing. Progress goes to stderr;
# stdout carries only the folder.
set -euo pipefail

LOG_PREFIX=crio
# shellcheck source=hack/lib/gobuild.sh
. "$(dirname "$0")/lib/gobuild.sh"
CRIO_VERSION="${CRIO_VERSION:-v1.34.0}"
CACHE_ROOT="${WARMER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/warmer}"
DEST="${1:-$CACHE_ROOT/crio-$CRIO_VERSION}"
command -v go >/dev/null || { say "go is not on PATH"; exit 1; }
command -v cc >/dev/null || { say "no C compiler (hack/install-testbed-deps.sh installs gcc)"; exit 1; }

mkdir -p "$DEST"
DEST="$(cd "$DEST" && pwd)"
if version_has "$DEST/crio" "${CRIO_VERSION#v}" version && [ -x "$DEST/pinns" ]; then
	say "crio $CRIO_VERSION present"
	echo "$DEST"
	exit 0
fi

src="$(go mod download -json "github.com/cri-o/cri-o@$CRIO_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p')"
[ -d "$src" ] || { say "cannot download github.com/cri-o/cri-o@$CRIO_VERSION"; exit 1; }
tmp="$(mktemp -d "${TMPDIR:-/tmp}/warmer-crio.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

say "building crio $CRIO_VERSION (about 4 minutes on a cold cache)"
tags="containers_image_ostree_stub containers_image_openpgp exclude_graphdriver_btrfs btrfs_noversion exclude_graphdriver_devicemapper"
(cd "$src" && CGO_ENABLED=1 timed go build -p 2 -trimpath -tags "$tags" -o "$tmp/crio" ./cmd/crio)
# pinns pins a pod's namespaces; crio checks it exists even for pulls.
cc -std=c99 -O2 -Wall -static -o "$tmp/pinns" "$src/pinns/src/pinns.c" "$src/pinns/src/sysctl.c"
mv -f "$tmp/crio" "$tmp/pinns" "$DEST/"
say "crio $CRIO_VERSION in $DEST"
echo "$DEST"
