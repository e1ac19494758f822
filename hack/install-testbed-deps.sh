#!/usr/bin/env bash
# Installs what the test bed runs as real processes and is not built from Go
# sources: containerd (with its CRI plugin), docker-registry and prometheus
# (the server that scrapes the agents in test/monitoring), and for the real
# node (test/cluster) runc, the CNI plugins, iptables and conntrack, conmon
# for the CRI-O node (test/crio, hack/install-crio.sh), from the
# distribution's packages; and a C compiler with libc's headers, which
# go test -race needs (cgo) for the test binaries and for the warmer binary
# the tests build with -race; and tmux, the real terminal kubectl warmer's
# live view is read in (test/plugin). Skips what is already installed.
set -euo pipefail

missing=()
command -v containerd >/dev/null || missing+=(containerd)
command -v docker-registry >/dev/null || missing+=(docker-registry)
command -v prometheus >/dev/null || missing+=(prometheus)
command -v runc >/dev/null || missing+=(runc)
command -v conmon >/dev/null || missing+=(conmon)
[ -x /usr/lib/cni/loopback ] || missing+=(containernetworking-plugins)
command -v iptables >/dev/null || missing+=(iptables)
command -v conntrack >/dev/null || missing+=(conntrack)
command -v gcc >/dev/null || missing+=(gcc)
command -v tmux >/dev/null || missing+=(tmux)
[ -e /usr/include/stdlib.h ] || missing+=(libc6-dev)
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" != 0 ]; then
	echo "install-testbed-deps: need root to install ${missing[*]} (try: sudo $0)" >&2
	exit 1
fi
command -v apt-get >/dev/null || { echo "install-testbed-deps: no apt-get; install ${missing[*]} by hand" >&2; exit 1; }

echo "install-testbed-deps: installing ${missing[*]}" >&2
# Keep the packages from starting system-wide daemons: the tests start their
# own instances on loopback.
guard=""
if [ ! -e /usr/sbin/policy-rc.d ]; then
	printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
	chmod +x /usr/sbin/policy-rc.d
	guard=/usr/sbin/policy-rc.d
fi
trap '[ -z "$guard" ] || rm -f "$guard"' EXIT
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
