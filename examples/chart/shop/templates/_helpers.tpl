{{- define "shop.fullname" -}}
{{- printf "%s-shop" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "shop.selector" -}}
app.kubernetes.io/name: shop
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}
