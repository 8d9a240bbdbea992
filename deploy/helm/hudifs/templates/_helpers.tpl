{{/* The driver name: the one the plugin gives in GetPluginInfo. Not a setting. */}}
{{- define "hudifs.driverName" -}}
csi.hudifs.dev
{{- end -}}

{{- define "hudifs.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* <release>-hudifs, or the release name alone when it already says hudifs. */}}
{{- define "hudifs.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "hudifs.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "hudifs.selectorLabels" . }}
app.kubernetes.io/part-of: hudifs
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "hudifs.selectorLabels" -}}
app.kubernetes.io/name: {{ include "hudifs.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: csi-node
{{- end -}}

{{- define "hudifs.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (printf "%s-csi-node" (include "hudifs.fullname" .)) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* kubelet's directory on the nodes, without a trailing slash. */}}
{{- define "hudifs.kubeletDir" -}}
{{- .Values.kubeletDir | trimSuffix "/" -}}
{{- end -}}

{{/* The plugin's directory on the nodes: its socket, and its state below. */}}
{{- define "hudifs.pluginDir" -}}
{{- printf "%s/plugins/%s" (include "hudifs.kubeletDir" .) (include "hudifs.driverName" .) -}}
{{- end -}}

{{- define "hudifs.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
