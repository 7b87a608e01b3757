{{/*
Names and labels shared by every template. Object names derive from kuota.fullname so two releases in one
cluster would not collide on namespaced objects (cluster-scoped ones, like the CRDs, allow one release only).
*/}}

{{- define "kuota.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "kuota.fullname" -}}
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

{{- define "kuota.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "kuota.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: kuota
{{- end }}

{{/* Selector labels of one component; call with (dict "root" $ "component" "manager"). */}}
{{- define "kuota.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kuota.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "kuota.componentLabels" -}}
{{ include "kuota.labels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/* An image reference; call with (dict "root" $ "image" .Values.manager.image). A digest wins over a tag. */}}
{{- define "kuota.image" -}}
{{- $registry := .root.Values.imageRegistry -}}
{{- $repository := ternary (printf "%s/%s" $registry .image.repository) .image.repository (ne $registry "") -}}
{{- if .image.digest -}}
{{- printf "%s@%s" $repository .image.digest -}}
{{- else -}}
{{- printf "%s:%s" $repository (default .root.Chart.AppVersion .image.tag) -}}
{{- end -}}
{{- end }}

{{- define "kuota.manager.name" -}}{{ include "kuota.fullname" . }}-manager{{- end }}
{{- define "kuota.manager.serviceAccountName" -}}{{ include "kuota.fullname" . }}-manager{{- end }}
{{- define "kuota.manager.configMapName" -}}{{ include "kuota.fullname" . }}-manager-config{{- end }}
{{- define "kuota.manager.metricsServiceName" -}}{{ include "kuota.fullname" . }}-manager-metrics{{- end }}
{{- define "kuota.manager.metricsReaderName" -}}{{ include "kuota.fullname" . }}-metrics-reader{{- end }}
{{- define "kuota.manager.metricsScraperName" -}}{{ include "kuota.fullname" . }}-metrics-scraper{{- end }}
{{- define "kuota.webhook.serviceName" -}}{{ include "kuota.fullname" . }}-webhook{{- end }}
{{- /* kuota.webhook.crds.versions.conversion_service_name: the manager's certificate names it too. */}}
{{- define "kuota.webhook.conversionServiceName" -}}{{ include "kuota.webhook.serviceName" . }}-conversion{{- end }}
{{- /* kuota.webhook.visibility.routes.visibility_service_name: the manager's certificate names it too. */}}
{{- define "kuota.webhook.visibilityServiceName" -}}{{ include "kuota.webhook.serviceName" . }}-visibility{{- end }}
{{- define "kuota.visibility.name" -}}{{ include "kuota.fullname" . }}-visibility{{- end }}
{{- define "kuota.webhook.mutatingName" -}}{{ include "kuota.fullname" . }}-mutating-webhook{{- end }}
{{- define "kuota.webhook.validatingName" -}}{{ include "kuota.fullname" . }}-validating-webhook{{- end }}
{{- define "kuota.webhook.certificateName" -}}{{ include "kuota.fullname" . }}-webhook-serving{{- end }}
{{- define "kuota.webhook.issuerName" -}}{{ include "kuota.fullname" . }}-selfsigned{{- end }}
{{- define "kuota.webhook.secretName" -}}
{{- default (printf "%s-webhook-tls" (include "kuota.fullname" .)) .Values.webhook.certificates.secretName -}}
{{- end }}
{{- define "kuota.webhook.selfManaged" -}}{{ eq .Values.webhook.certificates.mode "self-managed" }}{{- end }}
{{- define "kuota.exporter.name" -}}{{ include "kuota.fullname" . }}-exporter{{- end }}
{{- define "kuota.report.name" -}}{{ include "kuota.fullname" . }}-report{{- end }}
{{- define "kuota.report.claimName" -}}
{{- default (include "kuota.report.name" .) .Values.report.storage.existingClaim -}}
{{- end }}

{{/* The leader Lease: passed as --lease-name and pinned by name in the manager's Role. */}}
{{- define "kuota.manager.leaseName" -}}kuota-manager{{- end }}

{{/*
Namespaces whose Jobs kuota never reviews: kube-system, kuota's own, and any the user adds. Used by the
webhooks' namespaceSelector and, unless the user sets one, by the Configuration's managedJobsNamespaceSelector.
*/}}
{{- define "kuota.excludedNamespaces" -}}
{{- $names := list "kube-system" .Release.Namespace -}}
{{- range .Values.webhook.excludedNamespaces -}}
{{- $names = append $names . -}}
{{- end -}}
{{- toJson (uniq $names) -}}
{{- end }}

{{- define "kuota.namespaceSelector" -}}
matchExpressions:
  - key: kubernetes.io/metadata.name
    operator: NotIn
    values: {{ include "kuota.excludedNamespaces" . }}
{{- end }}
