{{/* Object names: the release name (`helm install drax-scheduler ...` gives the
plain manifests' names). */}}
{{- define "drax.fullname" -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "drax.selectorLabels" -}}
app.kubernetes.io/name: drax-scheduler
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "drax.labels" -}}
{{ include "drax.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "drax.validate" -}}
{{- if not (has .Values.mode (list "allocator" "advisor")) -}}
{{- fail (printf "mode must be allocator or advisor, not %q" .Values.mode) -}}
{{- end -}}
{{- if and .Values.tls.enabled (not .Values.tls.certManager.enabled) (not (and .Values.tls.existingSecret.serving .Values.tls.existingSecret.client)) -}}
{{- fail "tls.enabled needs tls.certManager.enabled or both tls.existingSecret.serving and tls.existingSecret.client" -}}
{{- end -}}
{{- end -}}

{{/* The Secrets drax (serving) and kube-scheduler (client) mount with TLS on. */}}
{{- define "drax.servingSecret" -}}
{{- if .Values.tls.certManager.enabled -}}{{ include "drax.fullname" . }}-serving{{- else -}}{{ .Values.tls.existingSecret.serving }}{{- end -}}
{{- end -}}
{{- define "drax.clientSecret" -}}
{{- if .Values.tls.certManager.enabled -}}{{ include "drax.fullname" . }}-client{{- else -}}{{ .Values.tls.existingSecret.client }}{{- end -}}
{{- end -}}

{{/* The KubeSchedulerConfiguration: files/kube-scheduler/scheduler-config.yaml
(scheduler-config-https.yaml with TLS), with the values set over it. */}}
{{- define "drax.schedulerConfig" -}}
{{- $file := ternary "files/kube-scheduler/scheduler-config-https.yaml" "files/kube-scheduler/scheduler-config.yaml" .Values.tls.enabled -}}
{{- $cfg := .Files.Get $file | fromYaml -}}
{{- $_ := set $cfg "leaderElection" (dict "leaderElect" true "resourceNamespace" .Release.Namespace "resourceName" .Values.leaderElection.leaseName) -}}
{{- $profile := first $cfg.profiles -}}
{{- $_ := set $profile "schedulerName" .Values.schedulerName -}}
{{- if eq .Values.mode "advisor" -}}
{{- $_ := unset $profile "plugins" -}}
{{- $_ := unset $profile "percentageOfNodesToScore" -}}
{{- end -}}
{{- $pluginConfig := list -}}
{{- range $profile.pluginConfig -}}
{{- if ne .name "NodeAffinity" -}}{{- $pluginConfig = append $pluginConfig . -}}{{- end -}}
{{- end -}}
{{- if .Values.nodePool.enabled -}}
{{- $term := dict "matchExpressions" (list (dict "key" .Values.nodePool.key "operator" "In" "values" (list .Values.nodePool.value))) -}}
{{- $affinity := dict "requiredDuringSchedulingIgnoredDuringExecution" (dict "nodeSelectorTerms" (list $term)) -}}
{{- $pluginConfig = append $pluginConfig (dict "name" "NodeAffinity" "args" (dict "addedAffinity" $affinity)) -}}
{{- end -}}
{{- if $pluginConfig -}}
{{- $_ := set $profile "pluginConfig" $pluginConfig -}}
{{- else -}}
{{- $_ := unset $profile "pluginConfig" -}}
{{- end -}}
{{- $extender := first $cfg.extenders -}}
{{- $_ := set $extender "urlPrefix" (printf "%s://127.0.0.1:%d/scheduler" (ternary "https" "http" .Values.tls.enabled) (int .Values.drax.port)) -}}
{{- if eq .Values.mode "advisor" -}}
{{- $_ := unset $extender "bindVerb" -}}
{{- end -}}
{{- toYaml $cfg -}}
{{- end -}}

{{/* The rules of one object of files/rbac.yaml, found by kind and name. */}}
{{- define "drax.rbacRules" -}}
{{- $want := . -}}
{{- range $doc := regexSplit "(?m)^---\\s*$" ($want.root.Files.Get "files/rbac.yaml") -1 -}}
{{- $obj := fromYaml $doc -}}
{{- if and (eq (get $obj "kind") $want.kind) (eq (get (default dict (get $obj "metadata")) "name") $want.name) -}}
{{- toYaml $obj.rules -}}
{{- end -}}
{{- end -}}
{{- end -}}
