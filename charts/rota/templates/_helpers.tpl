{{/*
Labels on every object the chart renders (not on pods or in selectors: the
selectors are the kustomize install's, which cannot change on a live object).
*/}}
{{- define "rota.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/part-of: rota
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}

{{/*
An image reference from {repository, tag, digest}: repository:tag, the tag
defaulting to appVersion, and @digest when a digest is set.
Call with (list $ .Values.x.image).
*/}}
{{- define "rota.image" -}}
{{- $root := index . 0 -}}
{{- $image := index . 1 -}}
{{- $ref := printf "%s:%s" $image.repository (default $root.Chart.AppVersion $image.tag) -}}
{{- if $image.digest }}{{ $ref = printf "%s@%s" $ref $image.digest }}{{ end -}}
{{- $ref -}}
{{- end }}

{{/*
The username of one of the chart's ServiceAccounts, as the admission
policies match it. Call with (list $ "name").
*/}}
{{- define "rota.serviceAccountUser" -}}
{{- printf "system:serviceaccount:%s:%s" (index . 0).Release.Namespace (index . 1) -}}
{{- end }}

{{/*
More than one replica needs leader election. Call with (list "scheduler" .Values.scheduler).
*/}}
{{- define "rota.checkLeaderElection" -}}
{{- $name := index . 0 -}}
{{- $c := index . 1 -}}
{{- if and (gt (int $c.replicas) 1) (not $c.leaderElection.enabled) -}}
{{- fail (printf "%s.replicas is %d but %s.leaderElection.enabled is false: more than one replica needs leader election" $name (int $c.replicas) $name) -}}
{{- end -}}
{{- end }}

{{/*
The scheduler config's ConfigMap: rota-scheduler-config-<hash of the content>.
*/}}
{{- define "rota.schedulerConfigName" -}}
{{- printf "rota-scheduler-config-%s" (include "rota.schedulerConfig" . | sha256sum | trunc 10) -}}
{{- end }}
