{{/*
Chart name, truncated to a DNS label.
*/}}
{{- define "kaas.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Full name prefix of every resource: <release>-<chart>, or the release name
when it already contains the chart name. Truncated to 40 characters so that
"<prefix>-broker-headless" and the StatefulSet's controller-revision-hash
label (<statefulset>-<10 chars>) stay within 63.
*/}}
{{- define "kaas.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/*
helm.sh/chart label value.
*/}}
{{- define "kaas.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Labels shared by every resource (no component). Call with the root context.
*/}}
{{- define "kaas.commonLabels" -}}
helm.sh/chart: {{ include "kaas.chart" . }}
app.kubernetes.io/name: {{ include "kaas.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: kaas
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
Selector labels of one component. Call with (dict "ctx" $ "component" "broker").
*/}}
{{- define "kaas.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kaas.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/*
Full labels of one component's resources. Call with (dict "ctx" $ "component" "broker").
*/}}
{{- define "kaas.labels" -}}
{{ include "kaas.commonLabels" .ctx }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/*
Labels of a component's pods: the selector labels plus the version, but not
helm.sh/chart, so that a chart-only change does not roll the brokers (every
roll moves partitions). Call with (dict "ctx" $ "component" "broker").
*/}}
{{- define "kaas.podLabels" -}}
{{ include "kaas.selectorLabels" . }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
app.kubernetes.io/part-of: kaas
{{- end }}

{{/* Resource names. */}}
{{- define "kaas.broker.fullname" -}}
{{- printf "%s-broker" (include "kaas.fullname" .) }}
{{- end }}

{{- define "kaas.broker.headlessName" -}}
{{- printf "%s-broker-headless" (include "kaas.fullname" .) }}
{{- end }}

{{- define "kaas.bootstrapName" -}}
{{- printf "%s-bootstrap" (include "kaas.fullname" .) }}
{{- end }}

{{- define "kaas.operator.fullname" -}}
{{- printf "%s-operator" (include "kaas.fullname" .) }}
{{- end }}

{{- define "kaas.operator.metricsName" -}}
{{- printf "%s-operator-metrics" (include "kaas.fullname" .) }}
{{- end }}

{{/* Cluster-scoped names carry the namespace: one release name may exist in several namespaces. */}}
{{- define "kaas.operator.clusterRoleName" -}}
{{- printf "%s-%s-operator" .Release.Namespace (include "kaas.fullname" .) }}
{{- end }}

{{- define "kaas.broker.serviceAccountName" -}}
{{- if .Values.broker.serviceAccount.create }}
{{- default (include "kaas.broker.fullname" .) .Values.broker.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.broker.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "kaas.operator.serviceAccountName" -}}
{{- if .Values.operator.serviceAccount.create }}
{{- default (include "kaas.operator.fullname" .) .Values.operator.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.operator.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* Claims: the existing one, or the one the chart creates. */}}
{{- define "kaas.dataClaimName" -}}
{{- default (printf "%s-data" (include "kaas.fullname" .)) .Values.storage.data.existingClaim }}
{{- end }}

{{- define "kaas.controlPlaneClaimName" -}}
{{- default (printf "%s-control-plane" (include "kaas.fullname" .)) .Values.storage.controlPlane.existingClaim }}
{{- end }}

{{/* Mount paths. */}}
{{- define "kaas.dataDir" -}}/var/lib/kaas{{- end }}
{{- define "kaas.clusterDir" -}}/var/lib/kaas-cluster{{- end }}

{{/*
Image reference. Call with (dict "image" .Values.image "ctx" $).
*/}}
{{- define "kaas.image" -}}
{{- if .image.digest }}
{{- printf "%s@%s" .image.repository .image.digest }}
{{- else }}
{{- printf "%s:%s" .image.repository (default .ctx.Chart.AppVersion .image.tag | toString) }}
{{- end }}
{{- end }}

{{/*
Seconds in a Go duration string ("20s", "1m30s", "250ms"), rounded up.
*/}}
{{- define "kaas.durationSeconds" -}}
{{- $s := toString . }}
{{- if not (regexMatch "^([0-9]+(\\.[0-9]+)?(h|ms|m|s|us|ns))+$" $s) }}
{{- fail (printf "kaas: %q is not a duration such as 20s, 1m30s or 250ms" $s) }}
{{- end }}
{{- $units := dict "h" 3600.0 "m" 60.0 "s" 1.0 "ms" 0.001 "us" 0.000001 "ns" 0.000000001 }}
{{- $total := 0.0 }}
{{- range regexFindAll "[0-9]+(\\.[0-9]+)?(h|ms|m|s|us|ns)" $s -1 }}
{{- $num := regexFind "^[0-9]+(\\.[0-9]+)?" . }}
{{- $unit := trimPrefix $num . }}
{{- $total = addf $total (mulf (float64 $num) (get $units $unit)) }}
{{- end }}
{{- ceil $total | int }}
{{- end }}

{{/*
Checks of values that a schema cannot express; rendered (as nothing) by the
StatefulSet.
*/}}
{{- define "kaas.validate" -}}
{{- $b := .Values.broker }}
{{- $shutdown := include "kaas.durationSeconds" $b.shutdownTimeout | int }}
{{- $lease := include "kaas.durationSeconds" $b.lease | int }}
{{- if le (int $b.terminationGracePeriodSeconds) (add $shutdown $lease | int) }}
{{- fail (printf "kaas: broker.terminationGracePeriodSeconds (%v) must exceed broker.shutdownTimeout (%s) + broker.lease (%s), or the broker is killed before it hands its partitions off" $b.terminationGracePeriodSeconds $b.shutdownTimeout $b.lease) }}
{{- end }}
{{- if not (has $b.checkVolume (list "refuse" "warn" "off")) }}
{{- fail (printf "kaas: broker.checkVolume must be refuse, warn or off, not %q" $b.checkVolume) }}
{{- end }}
{{- if not (has $b.logFormat (list "text" "json")) }}
{{- fail (printf "kaas: broker.logFormat must be text or json, not %q" $b.logFormat) }}
{{- end }}
{{- if not (has $b.podAntiAffinity (list "soft" "hard" "none" "")) }}
{{- fail (printf "kaas: broker.podAntiAffinity must be soft, hard or none, not %q" $b.podAntiAffinity) }}
{{- end }}
{{- if not (hasSuffix ":9092" $b.listen) }}
{{- fail (printf "kaas: broker.listen (%s) must use port 9092, the port the Services and advertised addresses use" $b.listen) }}
{{- end }}
{{- if not (hasSuffix ":9644" $b.admin) }}
{{- fail (printf "kaas: broker.admin (%s) must use port 9644, the port the probes and Services use" $b.admin) }}
{{- end }}
{{- if lt (int $b.replicas) 1 }}
{{- fail "kaas: broker.replicas must be at least 1" }}
{{- end }}
{{- if and .Values.serviceMonitor.enabled (not .Values.operator.enabled) }}
{{- fail "kaas: serviceMonitor.enabled needs operator.enabled (it scrapes the operator; brokerPodMonitor scrapes the brokers)" }}
{{- end }}
{{- if and .Values.storage.controlPlane.enabled (eq (include "kaas.controlPlaneClaimName" .) (include "kaas.dataClaimName" .)) }}
{{- fail "kaas: storage.controlPlane must be a different claim from storage.data" }}
{{- end }}
{{- end }}

{{/*
PersistentVolumeClaim spec fields shared by the data and control-plane claims.
Call with the storage.data or storage.controlPlane values.
*/}}
{{- define "kaas.claimSpec" -}}
accessModes:
  - ReadWriteMany
volumeMode: Filesystem
resources:
  requests:
    storage: {{ .size | quote }}
{{- if .storageClassName }}
{{- if eq "-" .storageClassName }}
storageClassName: ""
{{- else }}
storageClassName: {{ .storageClassName | quote }}
{{- end }}
{{- end }}
{{- with .volumeName }}
volumeName: {{ . | quote }}
{{- end }}
{{- with .selector }}
selector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/*
Volume mounts of the data (and control-plane) claims, for brokers and the operator.
*/}}
{{- define "kaas.storageMounts" -}}
- name: data
  mountPath: {{ include "kaas.dataDir" . }}
  {{- with .Values.storage.data.subPath }}
  subPath: {{ . | quote }}
  {{- end }}
{{- if .Values.storage.controlPlane.enabled }}
- name: control-plane
  mountPath: {{ include "kaas.clusterDir" . }}
  {{- with .Values.storage.controlPlane.subPath }}
  subPath: {{ . | quote }}
  {{- end }}
{{- end }}
- name: tmp
  mountPath: /tmp
{{- end }}

{{/*
Volumes of the data (and control-plane) claims.
*/}}
{{- define "kaas.storageVolumes" -}}
- name: data
  persistentVolumeClaim:
    claimName: {{ include "kaas.dataClaimName" . }}
{{- if .Values.storage.controlPlane.enabled }}
- name: control-plane
  persistentVolumeClaim:
    claimName: {{ include "kaas.controlPlaneClaimName" . }}
{{- end }}
- name: tmp
  emptyDir:
    sizeLimit: 64Mi
{{- end }}

{{/*
A probe's timing fields from values, without the chart's own keys.
*/}}
{{- define "kaas.probeTimings" -}}
{{- toYaml (omit . "enabled") }}
{{- end }}

{{/*
RBAC rules of the operator: Topics in the watched namespace(s).
*/}}
{{- define "kaas.operator.topicRules" -}}
# Topic resources: read them, keep the finalizer and status current.
- apiGroups: ["kaas.io"]
  resources: ["topics"]
  verbs: ["get", "list", "watch", "update", "patch"]
- apiGroups: ["kaas.io"]
  resources: ["topics/status"]
  verbs: ["get", "update", "patch"]
- apiGroups: ["kaas.io"]
  resources: ["topics/finalizers"]
  verbs: ["update"]
# User resources: the same.
- apiGroups: ["kaas.io"]
  resources: ["users"]
  verbs: ["get", "list", "watch", "update", "patch"]
- apiGroups: ["kaas.io"]
  resources: ["users/status"]
  verbs: ["get", "update", "patch"]
- apiGroups: ["kaas.io"]
  resources: ["users/finalizers"]
  verbs: ["update"]
# Secrets: the Users' passwords (watched, so a changed password is written
# at once) and the ones generated for Users that name none.
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get", "list", "watch", "create"]
# Events about Topics and Users (and leader election).
- apiGroups: ["", "events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch"]
{{- end }}

{{/*
RBAC rules of the operator: leader election in its own namespace.
*/}}
{{- define "kaas.operator.leaseRules" -}}
# Leader election (--leader-elect), in the operator's own namespace.
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  verbs: ["get", "list", "watch", "create", "update", "patch"]
{{- end }}
