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
An init container that reads this pod's zone from its node's topology label and writes the
final tidegate.toml: the rendered base plus the extra table it is given (`[node]`, `[edge]`).
include "tidegate.zoneInit" (list . "base.toml" "<extra TOML with $ZONE, $POD_NAME>")
*/}}
{{- define "tidegate.zoneInit" -}}
{{- $root := index . 0 -}}
- name: zone
  image: {{ $root.Values.zoneLookup.image }}
  imagePullPolicy: {{ $root.Values.zoneLookup.pullPolicy }}
  env:
    - name: NODE_NAME
      valueFrom: {fieldRef: {fieldPath: spec.nodeName}}
    - name: POD_NAME
      valueFrom: {fieldRef: {fieldPath: metadata.name}}
  command:
    - sh
    - -ec
    - |
      ZONE="$(kubectl get node "$NODE_NAME" -o jsonpath='{.metadata.labels.{{ $root.Values.topologyKey | replace "." "\\." }}}')"
      if [ -z "$ZONE" ]; then
        echo "node $NODE_NAME has no {{ $root.Values.topologyKey }} label: cannot name this pod's zone" >&2
        exit 1
      fi
      cp /etc/tidegate/{{ index . 1 }} /run/tidegate/tidegate.toml
      cat >>/run/tidegate/tidegate.toml <<TOML
      {{- index . 2 | nindent 6 }}
      TOML
      echo "zone $ZONE"; cat /run/tidegate/tidegate.toml
  securityContext:
    {{- include "tidegate.containerSecurity" $root | nindent 4 }}
  volumeMounts:
    - {name: config, mountPath: /etc/tidegate, readOnly: true}
    - {name: run, mountPath: /run/tidegate}
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
