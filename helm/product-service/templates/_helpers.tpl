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

{{/*
Selector labels: only name and instance. They never change between chart versions, because a
Deployment's selector is immutable and any change would make `helm upgrade` fail.
*/}}
{{- define "product-service.selectorLabels" -}}
app.kubernetes.io/name: {{ include "product-service.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
One label map, later maps winning: merged as maps (toYaml), so a key given twice is written once.
Usage: include "product-service.mergeLabels" (list $first $second ...)
*/}}
{{- define "product-service.mergeLabels" -}}
{{- $labels := dict }}
{{- range . }}
{{- $labels = mergeOverwrite $labels (deepCopy (. | default dict)) }}
{{- end }}
{{- toYaml $labels }}
{{- end }}

{{/* The chart's own labels, before commonLabels; on objects, with the chart's version. */}}
{{- define "product-service.chartLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "product-service.podChartLabels" . }}
{{- end }}

{{/*
The chart's labels on the pod template: not helm.sh/chart, so that a chart-only release (same image,
same values) leaves the pod template, and the running pods, as they are.
*/}}
{{- define "product-service.podChartLabels" -}}
app.kubernetes.io/version: {{ include "product-service.imageTag" . | trunc 63 | trimSuffix "-" | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: product-service
{{- end }}

{{/*
Labels on every object: the chart's, then commonLabels, then the object's own extra labels
(podLabels, a monitor's labels, the metrics component), then the selector labels, which no value
overrides (a pod that lost them would leave its Deployment's selector, and the API refuses that).
Usage: include "product-service.labelsWith" (list . $extra), or (list . $extra "pod") on a pod template
*/}}
{{- define "product-service.labelsWith" -}}
{{- $ctx := index . 0 }}
{{- $chart := include (ternary "product-service.podChartLabels" "product-service.chartLabels" (eq (len .) 3)) $ctx }}
{{- include "product-service.mergeLabels" (list ($chart | fromYaml) $ctx.Values.commonLabels (index . 1) (include "product-service.selectorLabels" $ctx | fromYaml)) }}
{{- end }}

{{/*
An object's metadata: its name (default the full name), namespace (default the release's), labels
(labelsWith, with `labels` as its own) and `annotations`, if any.
Usage: include "product-service.metadata" (dict "ctx" . "labels" $labels "annotations" $annotations "name" $name "namespace" $namespace)
*/}}
{{- define "product-service.metadata" -}}
name: {{ .name | default (include "product-service.fullname" .ctx) }}
namespace: {{ .namespace | default .ctx.Release.Namespace }}
labels:
  {{- include "product-service.labelsWith" (list .ctx .labels) | nindent 2 }}
{{- with .annotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/*
The `helm test` objects' labels: not the selector labels (name + instance), so that the Service,
PDB and NetworkPolicy never mistake the test pod for a server; commonLabels too, for admission
policies that require them of every pod.
*/}}
{{- define "product-service.testSelectorLabels" -}}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: helm-test
{{- end }}

{{- define "product-service.testLabels" -}}
{{- $own := dict "app.kubernetes.io/name" (printf "%s-test" (include "product-service.name" .) | trunc 63 | trimSuffix "-") }}
{{- include "product-service.mergeLabels" (list (include "product-service.chartLabels" . | fromYaml) .Values.commonLabels $own (include "product-service.testSelectorLabels" . | fromYaml)) }}
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
{{- include "product-service.fail" "image.tag must not be \"latest\": pin a version (or a digest) so rollouts and rollbacks are reproducible" }}
{{- end }}
{{- $tag }}
{{- end }}

{{/*
The image this chart version was released with, `repository:appVersion@digest`: a release stamps it
into Chart.yaml (artifacthub.io/images), never into values, so that neither `--reuse-values` nor a
values file copied from `helm show values` carries it to another chart version.
*/}}
{{- define "product-service.releasedImage" -}}
{{- range index .Chart.Annotations "artifacthub.io/images" | default "" | fromYamlArray }}
{{- if and (kindIs "map" .) (eq (toString .name) "product-service") }}{{ .image }}{{ end }}
{{- end }}
{{- end }}

{{/*
The digest the image is pulled by: image.digest, or else the released digest when the values ask
for exactly the released repository and version. Any other tag or repository is pulled by tag
(NOTES says so).
*/}}
{{- define "product-service.imageDigest" -}}
{{- if .Values.image.digest }}
{{- .Values.image.digest }}
{{- else }}
{{- $prefix := printf "%s:%s@" .Values.image.repository (include "product-service.imageTag" .) }}
{{- $released := include "product-service.releasedImage" . }}
{{- if hasPrefix $prefix $released }}{{ trimPrefix $prefix $released }}{{ end }}
{{- end }}
{{- end }}

{{/*
Image reference: repository:tag, then @digest when there is one; image.digest without image.tag is
`repository@digest` (digest-only pinning, as Renovate and Flux write it): the chart's default tag
would name another version. global.imageRegistry (the common
charts' convention, for a registry mirror) replaces the repository's registry; the digest stays
valid, since a mirror copies the image as it is.
*/}}
{{- define "product-service.image" -}}
{{- $repository := .Values.image.repository }}
{{- with (.Values.global).imageRegistry }}
{{- /* A first path component with a dot or a colon, or localhost, is a registry (Docker's rule). */}}
{{- $repository = printf "%s/%s" (trimSuffix "/" .) (regexReplaceAll "^([^/]*[.:][^/]*|localhost)/" $repository "") }}
{{- end }}
{{- $ref := printf "%s:%s" $repository (include "product-service.imageTag" .) }}
{{- if and .Values.image.digest (not .Values.image.tag) }}
{{- $ref = $repository }}
{{- end }}
{{- with include "product-service.imageDigest" . }}
{{- $ref = printf "%s@%s" $ref . }}
{{- end }}
{{- $ref }}
{{- end }}

{{/*
imagePullSecrets: global.imagePullSecrets (Bitnami's convention for an umbrella chart) then the
chart's own, each a name or {name}, written as {name} once each.
*/}}
{{- define "product-service.imagePullSecrets" -}}
{{- $names := list }}
{{- range concat ((.Values.global).imagePullSecrets | default list) (.Values.imagePullSecrets | default list) }}
{{- $names = append $names (kindIs "string" . | ternary . (toJson . | fromJson).name) }}
{{- end }}
{{- range uniq $names }}
- name: {{ . }}
{{- end }}
{{- end }}

{{/*
Refuses the values, with `message`. `fail` alone is not enough: `helm lint` renders in lint mode,
where fail only logs, and lint would pass values that install refuses. When fail returns, this is
lint: an error lint does report, carrying the same message.
Usage: include "product-service.fail" "message"
*/}}
{{- define "product-service.fail" -}}
{{- fail . }}
{{- $_ := semverCompare (printf "values refused: %s" .) "0.0.0" }}
{{- end }}

{{/*
Refuses values that lack `key`, a value this chart has a default for: they come from an older chart,
whose values `helm upgrade --reuse-values` (and Flux's `preserveValues`) put in place of this chart's.
Usage: include "product-service.olderValues" "monitoring.prometheusRule.alerts.X"
*/}}
{{- define "product-service.olderValues" -}}
{{- include "product-service.fail" (printf "%s is missing: these values come from an older chart version (helm upgrade --reuse-values keeps the previous release's values in place of this chart's defaults). Upgrade with --reset-then-reuse-values instead" .) }}
{{- end }}

{{/* Grace period: covers SHUTDOWN_DELAY + SHUTDOWN_TIMEOUT, plus 5 s for the span flush and exit. */}}
{{- define "product-service.terminationGracePeriodSeconds" -}}
{{- $needed := add .Values.shutdown.delaySeconds .Values.shutdown.timeoutSeconds }}
{{- if kindIs "invalid" .Values.terminationGracePeriodSeconds }}
{{- add $needed 5 }}
{{- else if lt (int .Values.terminationGracePeriodSeconds) (int $needed) }}
{{- include "product-service.fail" (printf "terminationGracePeriodSeconds (%v) must be at least shutdown.delaySeconds + shutdown.timeoutSeconds (%v), or the kubelet kills the pod mid-drain" .Values.terminationGracePeriodSeconds $needed) }}
{{- else }}
{{- .Values.terminationGracePeriodSeconds }}
{{- end }}
{{- end }}

{{/*
The pod fields a platform sets (a RuntimeClass, DNS, host aliases), shared by the Deployment and the
helm test pod, which must run and resolve names where the servers do.
*/}}
{{- define "product-service.podPlatformFields" -}}
{{- with .Values.runtimeClassName }}
runtimeClassName: {{ . }}
{{- end }}
{{- with .Values.dnsPolicy }}
{{- if and (eq . "None") (not ($.Values.dnsConfig).nameservers) }}
{{- include "product-service.fail" "dnsPolicy None needs dnsConfig.nameservers: the pod would have no DNS server at all" }}
{{- end }}
dnsPolicy: {{ . }}
{{- end }}
{{- with .Values.dnsConfig }}
dnsConfig:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.hostAliases }}
hostAliases:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/*
initContainers and extraContainers as given, each with the chart's container securityContext under
its own (its keys win), so that they meet the restricted Pod Security Standard unless they say
otherwise. Their images are theirs: global.imageRegistry does not rewrite them.
Usage: include "product-service.extraContainers" (list . $containers)
*/}}
{{- define "product-service.extraContainers" -}}
{{- $ctx := index . 0 }}
{{- $out := list }}
{{- range index . 1 }}
{{- $c := deepCopy . }}
{{- $_ := set $c "securityContext" (mergeOverwrite (deepCopy $ctx.Values.securityContext) (deepCopy (.securityContext | default dict))) }}
{{- $out = append $out $c }}
{{- end }}
{{- toYaml $out }}
{{- end }}

{{/*
Refuses memory or storage in fractions of a byte (`384m` is 0.384 bytes, not 384 MiB): the API
server takes it and the pod then cannot start. Everything else about quantities is the API's to judge.
Usage: include "product-service.checkResources" (list "resources" .Values.resources)
*/}}
{{- define "product-service.checkResources" -}}
{{- $path := index . 0 }}
{{- $resources := index . 1 | default dict }}
{{- range $kind, $quantities := pick $resources "requests" "limits" }}
{{- range $name, $value := $quantities | default dict }}
{{- $v := toString $value }}
{{- if and (regexMatch "^(memory|ephemeral-storage|hugepages-.+)$" $name) (regexMatch "[0-9.][num]$" $v) }}
{{- include "product-service.fail" (printf "%s.%s.%s is %s: the suffix m, u or n means a fraction of a byte (m is milli); write Mi (mebibytes) or M (megabytes), for example %sMi" $path $kind $name $v (regexReplaceAll "[num]$" $v "")) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/*
The Prometheus job of the release's metrics: the release's full name, which the chart's
ServiceMonitor and PodMonitor set explicitly. The alert rules and the dashboard select it with the
release namespace; whatever scrapes the metrics must keep the job equal to this.
*/}}
{{- define "product-service.prometheusJob" -}}
{{- include "product-service.fullname" . }}
{{- end }}

{{/* The metrics Service: `<full name>-metrics`, within the 63 characters of a Service name. */}}
{{- define "product-service.metricsServiceName" -}}
{{- printf "%s-metrics" (include "product-service.fullname" . | trunc 55 | trimSuffix "-") }}
{{- end }}

{{/*
The label that tells the metrics Service from the API's: the ServiceMonitor selects it, so it
never scrapes the API's Service.
*/}}
{{- define "product-service.metricsComponentLabel" -}}
app.kubernetes.io/component: metrics
{{- end }}

{{/*
One scrape endpoint of the ServiceMonitor (the metrics Service's port) or the PodMonitor (the
container's port), both named `metrics`. The Prometheus Operator names the job after the Service,
or `<namespace>/<PodMonitor>`: the first relabeling sets it to the job the alert rules and the
dashboard select; the values' own relabelings come after it.
Usage: include "product-service.scrapeEndpoint" (dict "ctx" . "monitor" .Values.monitoring.serviceMonitor)
*/}}
{{- define "product-service.scrapeEndpoint" -}}
{{- $monitor := .monitor -}}
- port: metrics
  path: /metrics
  {{- with $monitor.interval }}
  interval: {{ . }}
  {{- end }}
  {{- with $monitor.scrapeTimeout }}
  scrapeTimeout: {{ . }}
  {{- end }}
  relabelings:
    - action: replace
      targetLabel: job
      replacement: {{ include "product-service.prometheusJob" .ctx }}
    {{- with $monitor.relabelings }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- with $monitor.metricRelabelings }}
  metricRelabelings:
    {{- toYaml . | nindent 4 }}
  {{- end }}
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

{{/*
The container's Node.js flags (NODE_OPTIONS). It replaces the image's NODE_OPTIONS, so it carries
the young generation's size too. SIGUSR1 would open the V8 inspector, which any container of the
pod that can signal this one (`kubectl debug --target`, shareProcessNamespace) could then reach
on localhost: it is always off. Diagnostics write into their own volume, since the root filesystem
is read-only; a report leaves out the environment (the OTLP headers' API key) and the network
interfaces.
*/}}
{{- define "product-service.nodeOptions" -}}
{{- $flags := list }}
{{- if and .Values.nodeHeapPercent (dig "limits" "memory" "" (.Values.resources | default dict)) }}
{{- /* Node reads the cgroup memory limit; the heap gets this share of it. */}}
{{- $flags = append $flags (printf "--max-old-space-size-percentage=%v" .Values.nodeHeapPercent) }}
{{- end }}
{{- with .Values.nodeSemiSpaceMb }}
{{- $flags = append $flags (printf "--max-semi-space-size=%v" .) }}
{{- end }}
{{- $flags = append $flags "--disable-sigusr1" }}
{{- if .Values.diagnostics.enabled }}
{{- $dir := include "product-service.diagnosticsDir" . }}
{{- $flags = concat $flags (list "--report-on-signal" (printf "--report-signal=%s" (include "product-service.reportSignal" .)) (printf "--report-directory=%s" $dir) "--report-exclude-env" "--report-exclude-network") }}
{{- if .Values.diagnostics.heapSnapshot.enabled }}
{{- $flags = concat $flags (list (printf "--heapsnapshot-signal=%s" (include "product-service.heapSnapshotSignal" .)) (printf "--diagnostic-dir=%s" $dir)) }}
{{- end }}
{{- else if .Values.diagnostics.heapSnapshot.enabled }}
{{- include "product-service.fail" "diagnostics.heapSnapshot.enabled needs diagnostics.enabled (the volume the snapshot is written to)" }}
{{- end }}
{{- join " " (concat $flags .Values.extraNodeOptions) }}
{{- end }}

{{/* Where diagnostic reports and heap snapshots are written: the diagnostics emptyDir. */}}
{{- define "product-service.diagnosticsDir" -}}
/diagnostics
{{- end }}

{{/* Node's own report signal. */}}
{{- define "product-service.reportSignal" -}}
SIGUSR2
{{- end }}

{{/*
SIGUSR1 is the inspector's (and off), SIGUSR2 the report's. SIGURG is ignored by default, so with
heap snapshots off a stray one does nothing, and nothing in Kubernetes or Node sends it.
*/}}
{{- define "product-service.heapSnapshotSignal" -}}
SIGURG
{{- end }}

{{/* The chart's own environment variables, in order: a value may refer to an earlier one as $(NAME). */}}
{{- define "product-service.chartEnv" -}}
- name: PORT
  value: {{ .Values.containerPorts.http | quote }}
- name: METRICS_PORT
  value: {{ .Values.containerPorts.metrics | quote }}
- name: PROBE_PORT
  value: {{ .Values.containerPorts.probe | quote }}
- name: LOG_LEVEL
  value: {{ .Values.logLevel | quote }}
- name: MAX_CONNECTIONS
  value: {{ .Values.maxConnections | quote }}
- name: SHUTDOWN_DELAY
  value: {{ .Values.shutdown.delaySeconds | quote }}
- name: SHUTDOWN_TIMEOUT
  value: {{ .Values.shutdown.timeoutSeconds | quote }}
{{- with .Values.traceQueryParams }}
- name: TRACE_QUERY_PARAMS
  value: {{ join "," . | quote }}
{{- end }}
{{- with .Values.trustedProxies }}
- name: TRUSTED_PROXIES
  value: {{ join "," . | quote }}
{{- end }}
{{- with .Values.traceContextFrom }}
- name: TRACE_CONTEXT_FROM
  value: {{ join "," . | quote }}
{{- end }}
{{- with .Values.queueTimeHeader }}
- name: QUEUE_TIME_HEADER
  value: {{ . | quote }}
{{- end }}
{{- with .Values.queueTimeFrom }}
- name: QUEUE_TIME_FROM
  value: {{ join "," . | quote }}
{{- end }}
- name: NODE_OPTIONS
  value: {{ include "product-service.nodeOptions" . | quote }}
{{- /* Downward API, for the OpenTelemetry resource (k8s.* semantic conventions). */}}
{{- range list "K8S_POD_NAME=metadata.name" "K8S_POD_UID=metadata.uid" "K8S_NAMESPACE_NAME=metadata.namespace" "K8S_NODE_NAME=spec.nodeName" }}
- name: {{ first (splitList "=" .) }}
  valueFrom:
    fieldRef:
      fieldPath: {{ last (splitList "=" .) }}
{{- end }}
- name: OTEL_SERVICE_NAME
  value: {{ default (include "product-service.name" .) .Values.otel.serviceName | quote }}
{{- $attrs := list "k8s.pod.name=$(K8S_POD_NAME)" "k8s.pod.uid=$(K8S_POD_UID)" "k8s.namespace.name=$(K8S_NAMESPACE_NAME)" "k8s.node.name=$(K8S_NODE_NAME)" (printf "k8s.deployment.name=%s" (include "product-service.fullname" .)) (printf "k8s.container.name=%s" .Chart.Name) }}
{{- range $key, $value := .Values.otel.resourceAttributes }}
{{- $attrs = append $attrs (printf "%s=%s" $key (toString $value)) }}
{{- end }}
{{- /* $(VAR) references are expanded by the kubelet from the variables above. */}}
- name: OTEL_RESOURCE_ATTRIBUTES
  value: {{ join "," $attrs | quote }}
{{- with .Values.otel.endpoint }}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ . | quote }}
{{- end }}
{{- with .Values.otel.headersSecret.name }}
{{- /* Read from the Secret when the container starts: the credential is in no rendered object. */}}
- name: OTEL_EXPORTER_OTLP_HEADERS
  valueFrom:
    secretKeyRef:
      name: {{ . | quote }}
      key: {{ $.Values.otel.headersSecret.key | quote }}
{{- end }}
{{- $otel := .Values.otel }}
{{- range $pair := list (list "OTEL_EXPORTER_OTLP_PROTOCOL" $otel.protocol) (list "OTEL_TRACES_SAMPLER" $otel.sampler) (list "OTEL_TRACES_SAMPLER_ARG" $otel.samplerArg) (list "OTEL_PROPAGATORS" $otel.propagators) }}
{{- with last $pair }}
- name: {{ first $pair }}
  value: {{ . | quote }}
{{- end }}
{{- end }}
{{- /* Game-day faults: rendered only when set (null is unset; 0 is a valid "none"). */}}
{{- if not (kindIs "invalid" .Values.faults.errorRatio) }}
- name: FAULT_ERROR_RATIO
  value: {{ .Values.faults.errorRatio | toString | quote }}
{{- end }}
{{- if not (kindIs "invalid" .Values.faults.delaySeconds) }}
- name: FAULT_DELAY
  value: {{ .Values.faults.delaySeconds | toString | quote }}
{{- end }}
{{- end }}

{{/*
The container's env: the chart's variables, each replaced in place by the extraEnv entry of the
same name (in place, so that $(NAME) references keep resolving), then the other extraEnv entries.
A name listed twice would be refused by the API server under server-side apply (Helm 4, Argo CD).
NODE_OPTIONS is refused: replacing it would drop --disable-sigusr1 with the chart's other flags,
and a valueFrom cannot be merged with them; extraNodeOptions adds flags instead.
*/}}
{{- define "product-service.env" -}}
{{- $extra := dict }}
{{- range .Values.extraEnv }}
{{- if eq .name "NODE_OPTIONS" }}
{{- include "product-service.fail" "extraEnv cannot set NODE_OPTIONS: it would replace the chart's flags, --disable-sigusr1 among them. Put Node flags in extraNodeOptions (and nodeHeapPercent: 0 to size the heap with your own flag)" }}
{{- end }}
{{- if hasKey $extra .name }}
{{- include "product-service.fail" (printf "extraEnv lists %s twice: each variable name may appear once" .name) }}
{{- end }}
{{- $_ := set $extra .name . }}
{{- end }}
{{- $env := list }}
{{- $chartNames := list }}
{{- range include "product-service.chartEnv" . | fromYamlArray }}
{{- $chartNames = append $chartNames .name }}
{{- $env = append $env (get $extra .name | default .) }}
{{- end }}
{{- range .Values.extraEnv }}
{{- if not (has .name $chartNames) }}
{{- $env = append $env . }}
{{- end }}
{{- end }}
{{- toYaml $env }}
{{- end }}

{{/*
Fails, naming the value and the API, when the cluster does not serve the API of a custom resource
the values ask for, instead of the install failing later with "no matches for kind". Rendering
without a cluster (helm template, a GitOps tool's render step), pass the API with
`--api-versions <group/version/kind>`; Argo CD and Flux pass the target cluster's APIs themselves.
Usage: include "product-service.requireApi" (list . "monitoring.coreos.com/v1/ServiceMonitor" "monitoring.serviceMonitor.enabled" "the Prometheus Operator's CRDs")
*/}}
{{- define "product-service.requireApi" -}}
{{- $ctx := index . 0 }}
{{- $api := index . 1 }}
{{- if not ($ctx.Capabilities.APIVersions.Has $api) }}
{{- /* fail, not product-service.fail: lint cannot be told a cluster's APIs, and this is about the cluster, not the values. */}}
{{- fail (printf "%s is true, but the cluster does not serve %s: install %s first, or turn the value off. Rendering without a cluster (helm template, GitOps), pass --api-versions %s" (index . 2) $api (index . 3) $api) }}
{{- end }}
{{- end }}

{{/*
Warnings about the OTLP exporter's credentials, one per line, for NOTES.txt: headers (an API key)
given in plain text in the Deployment, or sent over an http:// endpoint, where anyone on the path
reads them. A warning, not a refusal: an http:// endpoint can be safe (a mesh's mTLS sidecar, a
collector on the node), which the chart cannot see. Read off the container's env as rendered, so
that extraEnv entries count as well.
*/}}
{{- define "product-service.otlpCredentialWarnings" -}}
{{- $headers := list }}
{{- $plain := list }}
{{- $clear := list }}
{{- range include "product-service.env" . | fromYamlArray }}
{{- if regexMatch "^OTEL_EXPORTER_OTLP_(TRACES_|METRICS_|LOGS_)?HEADERS$" .name }}
{{- $headers = append $headers .name }}
{{- if hasKey . "value" }}{{ $plain = append $plain .name }}{{ end }}
{{- else if and (regexMatch "^OTEL_EXPORTER_OTLP_(TRACES_|METRICS_|LOGS_)?ENDPOINT$" .name) (hasPrefix "http://" (.value | default "")) }}
{{- $clear = append $clear .value }}
{{- end }}
{{- end }}
{{- range $plain }}
WARNING: {{ . }} is set in plain text in extraEnv: anyone who can read the Deployment or the release reads it. Put it in a Secret (otel.headersSecret).
{{- end }}
{{- if and $headers $clear }}
WARNING: the OTLP headers ({{ join ", " $headers }}) are sent in clear text to {{ join ", " $clear }}. Use an https:// endpoint, unless a mesh encrypts that hop.
{{- end }}
{{- end }}

{{/* The egress rule for DNS (port 53, to networkPolicy.dnsTo or anywhere): an item of a NetworkPolicy's egress list. */}}
{{- define "product-service.dnsEgress" -}}
- ports:
    - port: 53
      protocol: UDP
    - port: 53
      protocol: TCP
  {{- with .Values.networkPolicy.dnsTo }}
  to:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}

{{/*
Egress an Istio data plane needs when egress is restricted: a sidecar fetches its configuration and
certificates from istiod (15012); in ambient mode connections to mesh workloads leave through the
HBONE tunnel (15008). Rules of a NetworkPolicyEgressRule list, or nothing; takes networkPolicy.istio.
*/}}
{{- define "product-service.istioEgress" -}}
{{- $istio := . }}
{{- if $istio.sidecar }}
- to:
    {{- toYaml $istio.istiodTo | nindent 4 }}
  ports:
    - port: 15012
      protocol: TCP
{{- end }}
{{- if $istio.ambient }}
- ports:
    - port: 15008
      protocol: TCP
{{- end }}
{{- end }}
