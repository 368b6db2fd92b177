{{/*
The rota-scheduler profile, manifests/scheduler/config.yaml with the chart's
values (the comments there say why each setting is what it is).
*/}}
{{- define "rota.schedulerConfig" -}}
{{- $s := .Values.scheduler -}}
{{- $p := $s.plugins -}}
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  qps: {{ $s.kubeAPIQPS }}
  burst: {{ $s.kubeAPIBurst }}
leaderElection:
  leaderElect: {{ $s.leaderElection.enabled }}
  {{- if $s.leaderElection.enabled }}
  resourceNamespace: {{ .Release.Namespace }}
  # Not "kube-scheduler": Rota must not contend for the default scheduler's lease.
  resourceName: rota-scheduler
  {{- end }}
# Score every feasible node: sampling would make placement depend on node order.
percentageOfNodesToScore: 100
profiles:
- schedulerName: rota-scheduler
  plugins:
    queueSort:
      enabled:
      - name: Fairness
      disabled:
      - name: PrioritySort
    preFilter:
      enabled:
      - name: WaitReason
      - name: Fairness
    filter:
      enabled:
      - name: Tiering
    bind:
      enabled:
      - name: Tiering
    preBind:
      enabled:
      - name: Tiering
    reserve:
      enabled:
      - name: WaitReason
    postFilter:
      enabled:
      - name: Reclaim
    multiPoint:
      disabled:
      - name: DefaultPreemption
      enabled:
      - name: Tiering
        weight: 10000
      - name: Reservation
      - name: Quota
      - name: Gang
      - name: Reclaim
      - name: WaitReason
  pluginConfig:
  - name: Tiering
    args:
      policyVersion: {{ $p.tiering.policyVersion | quote }}
      {{- if $p.tiering.disablePruning }}
      disablePruning: true
      {{- end }}
  - name: Quota
    args:
      {{- with $p.quota.modelAttribute }}
      modelAttribute: {{ . | quote }}
      {{- end }}
      tenants: {{- if $p.quota.tenants }}
        {{- toYaml $p.quota.tenants | nindent 6 }}
      {{- else }} []
      {{- end }}
  - name: Fairness
    args:
      defaultWeight: {{ $p.fairness.defaultWeight }}
      {{- with $p.fairness.tenants }}
      tenants:
        {{- toYaml . | nindent 6 }}
      {{- end }}
      ageing: {{ $p.fairness.ageing }}
  - name: Gang
    args:
      waitLimit: {{ $p.gang.waitLimit }}
{{- end }}
