{{/* The gateway's objects are named <fullname>-gateway: toolplane-gateway in a default install. */}}
{{- define "toolplane.gatewayName" -}}
{{- printf "%s-gateway" (include "toolplane.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "toolplane.gatewaySelectorLabels" -}}
app.kubernetes.io/name: {{ include "toolplane.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: gateway
{{- end }}

{{- define "toolplane.gatewayLabels" -}}
helm.sh/chart: {{ include "toolplane.chart" . }}
{{ include "toolplane.gatewaySelectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: toolplane
{{- end }}

{{/* The Secret of the transaction-token keys, and whether the gateway mints tokens at all: only under auth. */}}
{{- define "toolplane.txnTokenSecret" -}}
{{- .Values.gateway.txnToken.existingSecret | default (printf "%s-txn-keys" (include "toolplane.gatewayName" .) | trunc 63 | trimSuffix "-") }}
{{- end }}

{{- define "toolplane.txnTokens" -}}
{{- if and .Values.gateway.enabled .Values.gateway.txnToken.enabled (ne .Values.gateway.auth "none") }}true{{ end }}
{{- end }}
