#!/bin/sh
# Helm's rendered manifests come on stdin; the layer in folder $1 names them
# helm.yaml. What kustomize prints goes back to Helm.
set -eu
cat >"$1/helm.yaml"
exec kubectl kustomize "$1"
