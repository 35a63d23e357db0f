{{/* Names, labels and the shared pieces of the coordinator and edge pods. */}}

{{- define "tidegate.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "tidegate.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* Selector labels of one component: include "tidegate.selector" (list . "coordinator") */}}
{{- define "tidegate.selector" -}}
{{- $root := index . 0 -}}
app.kubernetes.io/name: {{ $root.Chart.Name }}
app.kubernetes.io/instance: {{ $root.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{- define "tidegate.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "tidegate.secretName" -}}
{{- .Values.secrets.existingSecret | default (printf "%s-secrets" (include "tidegate.fullname" .)) -}}
{{- end -}}

{{- define "tidegate.coordinator" -}}{{ include "tidegate.fullname" . }}-coordinator{{- end -}}
{{- define "tidegate.headless" -}}{{ include "tidegate.fullname" . }}-coordinator-headless{{- end -}}

{{/* The coordinators' URLs, one per replica, for the edges (they go round the list). */}}
{{- define "tidegate.coordinatorUrls" -}}
{{- $urls := list -}}
{{- range $i := until (int .Values.coordinator.replicas) -}}
{{- $urls = append $urls (printf "http://%s-%d.%s.%s.svc:%d" (include "tidegate.coordinator" $) $i (include "tidegate.headless" $) $.Release.Namespace (int $.Values.coordinator.port)) -}}
{{- end -}}
{{- join "," $urls -}}
{{- end -}}

{{/*
Environment variables read from the Secret: tokens and keys never appear as literal values.
Each is optional, so a key left out of the Secret leaves the setting at its default.
include "tidegate.secretEnv" (list . (list (list "TIDEGATE_UI__SECRET_KEY" "ui-secret-key") ...))
*/}}
{{- define "tidegate.secretEnv" -}}
{{- $root := index . 0 -}}
{{- range $pair := index . 1 }}
- name: {{ index $pair 0 }}
  valueFrom:
    secretKeyRef:
      name: {{ include "tidegate.secretName" $root }}
      key: {{ index $pair 1 }}
      optional: true
{{- end }}
{{- end -}}

{{/*
The pod's zone as an environment variable (TIDEGATE_NODE__ZONE, TIDEGATE_EDGE__ZONE), read from
the pod's own topology label through the downward API: Kubernetes' PodTopologyLabels admission
plugin copies the node's topology.kubernetes.io/zone and topology.kubernetes.io/region labels
onto every pod as it is bound to its node (Kubernetes 1.35 and later, where the
PodTopologyLabelsAdmission feature is beta and on by default; 1.33 and 1.34 with that feature
gate on). So no init container, no access to the Kubernetes API and no kubectl image. It copies
no other label, so topologyKey must be one of those two; a literal zone (the third argument,
from values) is used as given instead.
include "tidegate.zoneEnv" (list . "TIDEGATE_NODE__ZONE" "<literal zone, or empty>")
*/}}
{{- define "tidegate.zoneEnv" -}}
{{- $root := index . 0 -}}
{{- $literal := index . 2 -}}
- name: {{ index . 1 }}
{{- if $literal }}
  value: {{ $literal | quote }}
{{- else }}
{{- if not (has $root.Values.topologyKey (list "topology.kubernetes.io/zone" "topology.kubernetes.io/region")) }}
{{- fail (printf "topologyKey %s: a pod reads its zone from the labels Kubernetes copies from its node, which are only topology.kubernetes.io/zone and topology.kubernetes.io/region (set edge.zone for the edges; the coordinators of values-kafka.yaml need one of those two)" $root.Values.topologyKey) }}
{{- end }}
  valueFrom: {fieldRef: {fieldPath: {{ printf "metadata.labels['%s']" $root.Values.topologyKey | quote }}}}
{{- end }}
{{- end -}}

{{- define "tidegate.podSecurity" -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
fsGroup: 10001
seccompProfile: {type: RuntimeDefault}
{{- end -}}

{{- define "tidegate.containerSecurity" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities: {drop: [ALL]}
{{- end -}}

{{/*
TOML for tidegate.toml. Helm's toToml writes every number of the values as a float (100.0),
which an integer key such as units.count refuses; this writes whole numbers as integers (a
float key takes an integer too). include "tidegate.toml" (list "" $dict)
*/}}
{{- define "tidegate.tomlValue" -}}
{{- if kindIs "map" . -}}
{ {{- $first := true -}}{{- range $k, $v := . -}}{{ if not $first }}, {{ end }}{{ $first = false }}{{ $k }} = {{ include "tidegate.tomlValue" $v }}{{- end -}} }
{{- else if kindIs "slice" . -}}
[{{- range $i, $v := . -}}{{ if $i }}, {{ end }}{{ include "tidegate.tomlValue" $v }}{{- end -}}]
{{- else if kindIs "string" . -}}
{{ toJson . }}
{{- else if kindIs "bool" . -}}
{{ . }}
{{- else if or (kindIs "float64" .) (kindIs "float32" .) -}}
{{- if eq (float64 .) (float64 (int64 .)) }}{{ int64 . }}{{ else }}{{ . }}{{ end -}}
{{- else if kindIs "invalid" . -}}
{{- fail "tidegate.toml: a null value cannot be written (leave the key out)" -}}
{{- else -}}
{{ . }}
{{- end -}}
{{- end -}}

{{- define "tidegate.toml" -}}
{{- $prefix := index . 0 -}}
{{- $table := index . 1 -}}
{{- range $k, $v := $table }}
{{- if not (kindIs "map" $v) }}
{{ $k }} = {{ include "tidegate.tomlValue" $v }}
{{- end }}
{{- end }}
{{- range $k, $v := $table }}
{{- if kindIs "map" $v }}
{{- $name := ternary $k (printf "%s.%s" $prefix $k) (eq $prefix "") }}

[{{ $name }}]
{{- include "tidegate.toml" (list $name $v) }}
{{- end }}
{{- end }}
{{- end -}}
