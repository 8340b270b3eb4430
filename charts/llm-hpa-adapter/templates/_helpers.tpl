{{/* The release's base name: the release name when it already holds the chart's name. */}}
{{- define "llm-hpa-adapter.fullname" -}}
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

{{- define "llm-hpa-adapter.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "llm-hpa-adapter.selectorLabels" -}}
app.kubernetes.io/name: {{ include "llm-hpa-adapter.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "llm-hpa-adapter.labels" -}}
{{ include "llm-hpa-adapter.selectorLabels" . }}
app.kubernetes.io/part-of: llm-hpa-adapter
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "llm-hpa-adapter.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "llm-hpa-adapter.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "llm-hpa-adapter.servingSecret" -}}
{{- default (printf "%s-serving-cert" (include "llm-hpa-adapter.fullname" .)) .Values.tls.existingSecret -}}
{{- end -}}

{{/* The cert-manager Certificate whose CA the cainjector writes into the APIServices' caBundle. */}}
{{- define "llm-hpa-adapter.caCertificate" -}}
{{- if .Values.certManager.issuerRef -}}
{{- printf "%s/%s-serving-cert" .Release.Namespace (include "llm-hpa-adapter.fullname" .) -}}
{{- else -}}
{{- printf "%s/%s-ca" .Release.Namespace (include "llm-hpa-adapter.fullname" .) -}}
{{- end -}}
{{- end -}}

{{- define "llm-hpa-adapter.catalog" -}}
{{- default (.Files.Get "files/catalog.yaml") .Values.catalog -}}
{{- end -}}

{{/* The APIServices to register: a list of {group, version, priority}. */}}
{{- define "llm-hpa-adapter.apiServices" -}}
{{- $out := list -}}
{{- if .Values.apiServices.customMetrics.v1beta2 -}}
{{- $out = append $out (dict "group" "custom.metrics.k8s.io" "version" "v1beta2" "priority" 200) -}}
{{- end -}}
{{- if .Values.apiServices.customMetrics.v1beta1 -}}
{{- $out = append $out (dict "group" "custom.metrics.k8s.io" "version" "v1beta1" "priority" 100) -}}
{{- end -}}
{{- if .Values.apiServices.externalMetrics.v1beta1 -}}
{{- $out = append $out (dict "group" "external.metrics.k8s.io" "version" "v1beta1" "priority" 100) -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{/* The NetworkPolicy peers of kube-apiserver: cidrs, the `kubernetes` Service's endpoints (on install and
upgrade; `helm template` has no cluster to ask), and the extra peers. A JSON list. */}}
{{- define "llm-hpa-adapter.apiServerPeers" -}}
{{- $np := .Values.networkPolicy.apiServer -}}
{{- $out := list -}}
{{- range $np.cidrs -}}
{{- $out = append $out (dict "ipBlock" (dict "cidr" .)) -}}
{{- end -}}
{{- if $np.lookupEndpoints -}}
{{- $ep := lookup "v1" "Endpoints" "default" "kubernetes" -}}
{{- range (dig "subsets" list $ep) -}}
{{- range (dig "addresses" list .) -}}
{{- $cidr := printf "%s/%s" .ip (ternary "128" "32" (contains ":" .ip)) -}}
{{- $out = append $out (dict "ipBlock" (dict "cidr" $cidr)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toJson (concat $out $np.peers) -}}
{{- end -}}

{{/* The APIServices' caBundle when it is neither given nor injected: valid base64, no certificate. */}}
{{- define "llm-hpa-adapter.caBundlePlaceholder" -}}
{{- "PLACEHOLDER, not a certificate: set tls.caBundle or certManager.enabled (docs/deploy.md, TLS)\n" | b64enc -}}
{{- end -}}

{{/* prometheus-adapter's configuration file from the inline values (prometheusAdapterConfig.rules/externalRules). */}}
{{- define "llm-hpa-adapter.prometheusAdapterConfig" -}}
{{- $pa := .Values.prometheusAdapterConfig -}}
{{- $doc := dict -}}
{{- with $pa.rules }}{{ $_ := set $doc "rules" . }}{{ end -}}
{{- with $pa.externalRules }}{{ $_ := set $doc "externalRules" . }}{{ end -}}
{{- toYaml $doc -}}
{{- end }}
