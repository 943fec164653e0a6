{{/* The chart's name, or nameOverride. */}}
{{- define "toolplane.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The release's full name, used for every object the chart makes. It is the
release name when that already contains the chart name.
*/}}
{{- define "toolplane.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "toolplane.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "toolplane.selectorLabels" -}}
app.kubernetes.io/name: {{ include "toolplane.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: manager
{{- end }}

{{- define "toolplane.labels" -}}
helm.sh/chart: {{ include "toolplane.chart" . }}
{{ include "toolplane.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: toolplane
{{- end }}

{{- define "toolplane.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "toolplane.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The namespace of the tool table, the namespaced Role and the Lease. */}}
{{- define "toolplane.tableNamespace" -}}
{{- default .Release.Namespace .Values.table.namespace }}
{{- end }}

{{- define "toolplane.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/*
The labels of the manager Pods: the chart's, plus podLabels, which may add
labels but never change one the Deployment selects by; a Deployment whose
template stops matching its selector is refused, or worse, adopts other Pods.
*/}}
{{- define "toolplane.podLabels" -}}
{{- $selector := include "toolplane.selectorLabels" . | fromYaml }}
{{- range $k, $v := .Values.podLabels }}
{{- if hasKey $selector $k }}
{{- fail (printf "podLabels may not set %s: the Deployment selects its Pods by it" $k) }}
{{- end }}
{{- end }}
{{- include "toolplane.labels" . }}
{{- with .Values.podLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
GOMEMLIMIT in bytes: goMemLimitPercent of resources.limits.memory. The
Downward API can only pass the whole limit (its divisors are fixed units), so
the share is computed here from the quantity's suffix. Empty without a limit.
*/}}
{{- define "toolplane.goMemLimit" -}}
{{- include "toolplane.goMemLimitOf" (dict "resources" .Values.resources "percent" .Values.goMemLimitPercent) }}
{{- end }}

{{/* GOMEMLIMIT for any container: a dict of resources and percent. */}}
{{- define "toolplane.goMemLimitOf" -}}
{{- $limit := "" }}
{{- with .resources }}{{ with .limits }}{{ with .memory }}{{ $limit = toString . }}{{ end }}{{ end }}{{ end }}
{{- if and $limit (gt (int .percent) 0) }}
{{- $m := regexFindAll "^([0-9]+(?:\\.[0-9]+)?)(Ki|Mi|Gi|Ti|k|M|G|T)?$" $limit 1 }}
{{- if not $m }}
{{- fail (printf "resources.limits.memory %q: use a plain quantity such as 256Mi or 1Gi" $limit) }}
{{- end }}
{{- $number := regexReplaceAll "(Ki|Mi|Gi|Ti|k|M|G|T)$" $limit "" }}
{{- $suffix := trimPrefix $number $limit }}
{{- $units := dict "" 1 "k" 1000 "M" 1000000 "G" 1000000000 "T" 1000000000000 "Ki" 1024 "Mi" 1048576 "Gi" 1073741824 "Ti" 1099511627776 }}
{{- $bytes := mulf (float64 $number) (float64 (get $units $suffix)) }}
{{- divf (mulf $bytes (float64 .percent)) 100 | int64 }}
{{- end }}
{{- end }}
