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

{{/* The Secret of the gateway's serving certificate: the user's, or the chart's (or cert-manager's) <gateway>-tls. */}}
{{- define "toolplane.gatewayTLSSecret" -}}
{{- .Values.gateway.tls.existingSecret | default (printf "%s-tls" (include "toolplane.gatewayName" .)) }}
{{- end }}

{{/* The names agents reach the gateway's Service by, which its certificate must hold; a YAML list. */}}
{{- define "toolplane.gatewayDNSNames" -}}
{{- $svc := include "toolplane.gatewayName" . }}
{{- $ns := .Release.Namespace }}
- {{ printf "%s.%s.svc" $svc $ns }}
- {{ printf "%s.%s.svc.%s" $svc $ns (trimSuffix "." .Values.clusterDomain) }}
- {{ printf "%s.%s" $svc $ns }}
- {{ $svc }}
{{- end }}

{{/* The Service's port: gateway.service.port, else 443 with TLS and 80 without. */}}
{{- define "toolplane.gatewayServicePort" -}}
{{- .Values.gateway.service.port | default (ternary 443 80 .Values.gateway.tls.enabled) }}
{{- end }}

{{/* The Secret of the transaction-token keys, and whether the gateway mints tokens at all: only under auth. */}}
{{- define "toolplane.txnTokenSecret" -}}
{{- .Values.gateway.txnToken.existingSecret | default (printf "%s-txn-keys" (include "toolplane.gatewayName" .) | trunc 63 | trimSuffix "-") }}
{{- end }}

{{- define "toolplane.taskKeySecret" -}}
{{- .Values.gateway.tasks.existingSecret | default (printf "%s-task-key" (include "toolplane.gatewayName" .) | trunc 63 | trimSuffix "-") }}
{{- end }}

{{- define "toolplane.txnTokens" -}}
{{- if and .Values.gateway.enabled .Values.gateway.txnToken.enabled (ne .Values.gateway.auth "none") }}true{{ end }}
{{- end }}
