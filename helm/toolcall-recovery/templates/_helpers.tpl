{{/* Chart name, truncated to the 63 characters of a DNS label. */}}
{{- define "toolcall-recovery.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Full name: <release>-<chart>, or the release name when it already contains the chart name. */}}
{{- define "toolcall-recovery.fullname" -}}
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

{{/* chart label value: name-version. */}}
{{- define "toolcall-recovery.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels of every resource. */}}
{{- define "toolcall-recovery.labels" -}}
helm.sh/chart: {{ include "toolcall-recovery.chart" . }}
{{ include "toolcall-recovery.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: toolcall-recovery
{{- end }}

{{/* Labels that select the worker pods. */}}
{{- define "toolcall-recovery.selectorLabels" -}}
app.kubernetes.io/name: {{ include "toolcall-recovery.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
Labels that select the worker pods only: the migration and backfill Jobs' pods carry
another component, so the Service, the PodDisruptionBudget and the Deployment never
select them.
*/}}
{{- define "toolcall-recovery.workerSelectorLabels" -}}
{{ include "toolcall-recovery.selectorLabels" . }}
app.kubernetes.io/component: worker
{{- end }}

{{/* The ServiceAccount of the worker. */}}
{{- define "toolcall-recovery.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "toolcall-recovery.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The image reference. */}}
{{- define "toolcall-recovery.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}

{{/*
The Secret holding the connection URLs: the existing one, or the one this chart creates
(which needs both URLs).
*/}}
{{- define "toolcall-recovery.secretName" -}}
{{- if .Values.secrets.existingSecret }}
{{- .Values.secrets.existingSecret }}
{{- else }}
{{- if not (and .Values.secrets.databaseUrl .Values.secrets.amqpUrl) }}
{{- fail "toolcall-recovery: set secrets.existingSecret (a Secret with DATABASE_URL and AMQP_URL), or both secrets.databaseUrl and secrets.amqpUrl" }}
{{- end }}
{{- include "toolcall-recovery.fullname" . }}
{{- end }}
{{- end }}

{{/* Environment variables from the Secret, shared by the worker and the migration Job. */}}
{{- define "toolcall-recovery.databaseEnv" -}}
- name: DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "toolcall-recovery.secretName" . }}
      key: {{ .Values.secrets.keys.databaseUrl }}
{{- end }}

{{/* Common pod-level settings. */}}
{{- define "toolcall-recovery.imagePullSecrets" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}
