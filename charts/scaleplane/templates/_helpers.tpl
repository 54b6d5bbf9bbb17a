{{/* Common labels of every object of the chart. */}}
{{- define "scaleplane.labels" -}}
app.kubernetes.io/part-of: scaleplane
app.kubernetes.io/managed-by: {{ .Values.managedBy | default .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "scaleplane.controllerManager.name" -}}scaleplane-controller-manager{{- end -}}
{{- define "scaleplane.webhook.name" -}}scaleplane-webhook{{- end -}}

{{- define "scaleplane.webhook.secretName" -}}
{{- .Values.webhook.existingSecret | default "scaleplane-webhook-cert" -}}
{{- end -}}

{{/* The webhook's server side: its Deployment, Service and certificate. */}}
{{- define "scaleplane.webhook.server" -}}
{{- if and .Values.webhook.enabled .Values.webhook.server.enabled -}}true{{- end -}}
{{- end -}}

{{/* The webhook's ValidatingWebhookConfiguration. */}}
{{- define "scaleplane.webhook.configuration" -}}
{{- if and .Values.webhook.enabled .Values.webhook.configuration.enabled -}}true{{- end -}}
{{- end -}}

{{/*
The chart makes a self-signed certificate when given no other source. Its CA
must reach the configuration's caBundle, and Helm shares nothing between
templates, so the Secret is rendered next to the configuration, which is
only possible when both are in the same render.
*/}}
{{- define "scaleplane.webhook.selfSigned" -}}
{{- if and (not .Values.webhook.certManager.enabled) (not .Values.webhook.existingSecret) -}}true{{- end -}}
{{- end -}}

{{/*
image renders repository:tag, the tag defaulting to the appVersion, and
@digest when one is set (a release pins its images by digest:
docs/releasing.md), so that the tag names the release and the digest is what
runs.
*/}}
{{- define "scaleplane.image" -}}
{{- $tag := .image.tag | default .root.Chart.AppVersion -}}
{{ .image.repository }}:{{ $tag }}{{ with .image.digest }}@{{ . }}{{ end }}
{{- end -}}
