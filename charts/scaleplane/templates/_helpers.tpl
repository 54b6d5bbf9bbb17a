{{/* Common labels of every object of the chart. */}}
{{- define "scaleplane.labels" -}}
app.kubernetes.io/part-of: scaleplane
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "scaleplane.controllerManager.name" -}}scaleplane-controller-manager{{- end -}}
{{- define "scaleplane.webhook.name" -}}scaleplane-webhook{{- end -}}

{{- define "scaleplane.webhook.secretName" -}}
{{- .Values.webhook.existingSecret | default "scaleplane-webhook-cert" -}}
{{- end -}}

{{/* image renders repository:tag, the tag defaulting to the appVersion. */}}
{{- define "scaleplane.image" -}}
{{- $tag := .image.tag | default .root.Chart.AppVersion -}}
{{ .image.repository }}:{{ $tag }}
{{- end -}}
