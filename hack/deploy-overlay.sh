#!/usr/bin/env bash
# Writes, in DIR, a kustomize overlay of config/default that runs the image
# IMG instead of the release config/default names: what `make push
# IMG=...` pushed. `make deploy IMG=...` writes it and applies it.
#
#   hack/deploy-overlay.sh registry.example/warmer:dev bin/deploy
#
# IMG takes a tag (name:tag) or a digest (name@sha256:...).
set -euo pipefail

[ $# -eq 2 ] || { echo "usage: $0 IMG DIR" >&2; exit 2; }
img="$1"
dir="$2"
case "$img" in
*@sha256:*)
	name="${img%@*}"
	# name:tag@digest: the digest decides.
	last="${name##*/}"
	[[ "$last" != *:* ]] || name="${name%:*}"
	pin="digest: ${img#*@}"
	;;
*)
	last="${img##*/}"
	if [[ "$last" != *:* ]]; then
		echo "deploy: IMG=$img names no tag or digest; give one, e.g. IMG=$img:dev (the tag make push pushed)" >&2
		exit 2
	fi
	name="${img%:*}"
	pin="newTag: ${img##*:}"
	;;
esac

root="$(cd "$(dirname "$0")/.." && pwd)"
mkdir -p "$dir"
base="$(realpath --relative-to="$dir" "$root/config/default")"
cat >"$dir/kustomization.yaml" <<YAML
# Written by hack/deploy-overlay.sh: config/default running $img.
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - $base
images:
  - name: ghcr.io/warmer-dev/warmer
    newName: $name
    $pin
YAML
echo "$dir/kustomization.yaml: config/default with $img" >&2
