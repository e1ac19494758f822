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
warmer.checkArgs refuses, at render time, a role's extraArgs flag that the
chart's objects depend on, rather than reading the flag's value out of
extraArgs: the binary's parser (pflag, -name spellings, a value taken
from the next argument, list flags such as --images-from-kinds adding
up rather than the last one winning) would have to be copied here, and
any drift would again leave a permission that the flag turned off. A
refusal of the name in any spelling cannot under-detect. Refused:
- a flag whose value decides permissions or the admission policy: set
  in <role>.flags, which the feature helpers above read;
- a flag also set in <role>.flags: one value per flag;
- a flag the chart sets from other values (the runtime's socket, the
  credential providers' mounts, the namespace of its Roles), in flags
  too.
Call with (dict "root" $ "role" "agent"); renders nothing.
*/}}
{{- define "warmer.checkArgs" -}}
{{- $role := .role -}}
{{- $values := index .root.Values $role -}}
{{- $features := get (dict
  "agent" (list "startup-taint" "kubelet-address")
  "controller" (list "images-from-kinds")) $role -}}
{{- $ns := "the release's namespace, where the chart's Roles grant it" -}}
{{- $owned := get (dict
  "agent" (dict
    "container-runtime-endpoint" "runtime.preset or runtime.socketPath"
    "image-credential-provider-config" "credentialProviders.config"
    "image-credential-provider-bin-dir" "credentialProviders.binDir"
    "pull-secret-namespace" $ns)
  "controller" (dict
    "leader-election-namespace" $ns
    "pull-secret-namespace" $ns)) $role -}}
{{- range $name, $_ := $values.flags -}}
{{- if hasKey $owned $name -}}
{{- fail (printf "%s.flags.%s: the chart sets --%s from %s" $role $name $name (get $owned $name)) -}}
{{- end -}}
{{- end -}}
{{- range $values.extraArgs -}}
{{- $arg := toString . -}}
{{- if hasPrefix "-" $arg -}}
{{- $name := $arg | trimPrefix "-" | trimPrefix "-" | splitList "=" | first -}}
{{- if hasKey $owned $name -}}
{{- fail (printf "%s.extraArgs sets --%s: the chart sets it from %s" $role $name (get $owned $name)) -}}
{{- else if has $name $features -}}
{{- fail (printf "%s.extraArgs sets --%s: set %s.flags.%s instead, which the chart's permissions follow" $role $name $role $name) -}}
{{- else if hasKey $values.flags $name -}}
{{- fail (printf "%s.extraArgs sets --%s, which %s.flags.%s sets too: set it in one place" $role $name $role $name) -}}
{{- end -}}
{{- end -}}
{{- end -}}
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
