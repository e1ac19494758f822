{{/*
Labels of every object: the two that config/ sets (and selectors use), then
Helm's own. Call with (dict "root" $ "component" "agent").
*/}}
{{- define "warmer.labels" -}}
app.kubernetes.io/name: warmer
app.kubernetes.io/component: {{ .component }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version }}
{{- end }}

{{/* The image both roles run: by digest when one is set (a release's
chart sets it), else by tag. */}}
{{- define "warmer.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}
{{- end }}

{{/*
The runtime's CRI socket on the node, from runtime.preset unless set
itself, and what of it to mount. The paths are the runtimes' defaults;
docs/operations.md lists them. Nothing else of the node is mounted: the
image filesystem's level comes from the kubelet.
*/}}
{{- define "warmer.runtime" -}}
{{- $presets := dict
  "containerd" (dict "socketPath" "/run/containerd/containerd.sock")
  "crio" (dict "socketPath" "/var/run/crio/crio.sock")
  "k3s" (dict "socketPath" "/run/k3s/containerd/containerd.sock")
  "rke2" (dict "socketPath" "/run/k3s/containerd/containerd.sock")
  "cri-dockerd" (dict "socketPath" "/run/cri-dockerd.sock")
}}
{{- $preset := get $presets .Values.runtime.preset }}
{{- if not $preset }}
{{- fail (printf "runtime.preset %q is none of containerd, crio, k3s, rke2, cri-dockerd" .Values.runtime.preset) }}
{{- end }}
{{- $socket := .Values.runtime.socketPath | default $preset.socketPath }}
socketPath: {{ $socket }}
{{- /*
The socket's folder is mounted rather than the socket, which a restarted
runtime makes anew; but never all of /run: a socket right in it (as
cri-dockerd's, which systemd holds across restarts) is mounted itself.
*/}}
{{- if has (dir $socket) (list "/run" "/var/run") }}
socketMount: {{ $socket }}
socketMountType: Socket
{{- else }}
socketMount: {{ dir $socket }}
socketMountType: Directory
{{- end }}
{{- end }}

{{- /*
The features that need permissions of their own, each on unless its flag
turns it off; a feature that is off installs none of its rules
(config/components/without-* do the same for kustomize). Each renders
"true" or nothing.
*/}}
{{- define "warmer.startupTaint" -}}
{{- $v := index .Values.agent.flags "startup-taint" -}}
{{- if or (kindIs "invalid" $v) (ne (toString $v) "") }}true{{ end -}}
{{- end }}

{{- define "warmer.kubeletStats" -}}
{{- $v := index .Values.agent.flags "kubelet-address" -}}
{{- if or (kindIs "invalid" $v) (ne (toString $v) "") }}true{{ end -}}
{{- end }}

{{- define "warmer.imagesFrom" -}}
{{- $v := index .Values.controller.flags "images-from-kinds" -}}
{{- if or (kindIs "invalid" $v) (not (has (toString $v) (list "" "none"))) }}true{{ end -}}
{{- end }}

{{- /*
Where the controller may read the pull secrets ImageWarms name:
"namespaces" (opt-in RoleBindings) or "cluster"; anything else fails.
*/}}
{{- define "warmer.pullSecretScope" -}}
{{- $v := .Values.pullSecrets.readScope | default "namespaces" -}}
{{- if not (has $v (list "namespaces" "cluster")) -}}
{{- fail (printf "pullSecrets.readScope is %q; want namespaces or cluster" $v) -}}
{{- end -}}
{{- $v -}}
{{- end }}
