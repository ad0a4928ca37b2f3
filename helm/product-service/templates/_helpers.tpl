{{/* Chart name, overridable. */}}
{{- define "product-service.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Full name of the release's objects: <release>-<name>, or just the release name when it already
contains the chart name. Truncated to 63 characters, the DNS label limit.
*/}}
{{- define "product-service.fullname" -}}
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

{{- define "product-service.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Selector labels: only name and instance. They never change between chart versions, because a
Deployment's selector is immutable and any change would make `helm upgrade` fail.
*/}}
{{- define "product-service.selectorLabels" -}}
app.kubernetes.io/name: {{ include "product-service.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* Labels on every object. */}}
{{- define "product-service.labels" -}}
helm.sh/chart: {{ include "product-service.chart" . }}
{{ include "product-service.selectorLabels" . }}
app.kubernetes.io/version: {{ include "product-service.imageTag" . | trunc 63 | trimSuffix "-" | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: product-service
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "product-service.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "product-service.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* Image tag: the chart's appVersion unless set; `latest` is refused (not reproducible, not rollback-able). */}}
{{- define "product-service.imageTag" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag | toString }}
{{- if eq $tag "latest" }}
{{- fail "image.tag must not be \"latest\": pin a version (or a digest) so rollouts and rollbacks are reproducible" }}
{{- end }}
{{- $tag }}
{{- end }}

{{/* Image reference: repository:tag, or repository:tag@digest when a digest is given. */}}
{{- define "product-service.image" -}}
{{- $ref := printf "%s:%s" .Values.image.repository (include "product-service.imageTag" .) }}
{{- if .Values.image.digest }}
{{- $ref = printf "%s@%s" $ref .Values.image.digest }}
{{- end }}
{{- $ref }}
{{- end }}

{{/* Grace period: covers SHUTDOWN_DELAY + SHUTDOWN_TIMEOUT, plus 5 s for the span flush and exit. */}}
{{- define "product-service.terminationGracePeriodSeconds" -}}
{{- $needed := add .Values.shutdown.delaySeconds .Values.shutdown.timeoutSeconds }}
{{- if kindIs "invalid" .Values.terminationGracePeriodSeconds }}
{{- add $needed 5 }}
{{- else if lt (int .Values.terminationGracePeriodSeconds) (int $needed) }}
{{- fail (printf "terminationGracePeriodSeconds (%v) must be at least shutdown.delaySeconds + shutdown.timeoutSeconds (%v), or the kubelet kills the pod mid-drain" .Values.terminationGracePeriodSeconds $needed) }}
{{- else }}
{{- .Values.terminationGracePeriodSeconds }}
{{- end }}
{{- end }}

{{/* Pod security context shared by the Deployment and the helm test pod. */}}
{{- define "product-service.podSecurityContext" -}}
{{- toYaml .Values.podSecurityContext }}
{{- end }}

{{/*
The Prometheus job of the release's metrics: the job the chart's ServiceMonitor produces, the
Service name (the release's full name). The alert rules select it with the release namespace;
whatever scrapes the metrics must keep the job equal to this.
*/}}
{{- define "product-service.prometheusJob" -}}
{{- include "product-service.fullname" . }}
{{- end }}

{{/*
Grafana uid of the release's dashboard: monitoring.grafanaDashboard.uid, or one derived from the
release's namespace and full name (Grafana allows 40 characters), so that two releases never
overwrite each other's dashboard.
*/}}
{{- define "product-service.dashboardUid" -}}
{{- $uid := .Values.monitoring.grafanaDashboard.uid }}
{{- if not $uid }}
{{- $uid = printf "product-service-%s" (printf "%s/%s" .Release.Namespace (include "product-service.fullname" .) | sha256sum | trunc 16) }}
{{- end }}
{{- $uid }}
{{- end }}
