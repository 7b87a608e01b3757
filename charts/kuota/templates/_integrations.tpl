{{- /*
The integrations kuota implements, by Kueue's framework name (managerConfig.integrations.frameworks): what the
webhook configurations and the RBAC rules are generated from. Mirrors kuota.webhook.jobs.registry.ADAPTERS and
kuota.webhook.jobs.pod_parents.PARENTS (and "pod"); tests/unit/chart compares the rendered webhooks and rules with
the admission plane's for every name. A pod parent's mutating webhook also reviews UPDATE, and it is only read.
*/ -}}
{{- define "kuota.integrationKinds" -}}
batch/job: {kind: job, group: batch, version: v1, plural: jobs}
deployment: {kind: deployment, group: apps, version: v1, plural: deployments, mutate: [CREATE, UPDATE], verbs: [get, list, watch]}
statefulset: {kind: statefulset, group: apps, version: v1, plural: statefulsets, mutate: [CREATE, UPDATE], verbs: [get, list, watch]}
leaderworkerset.x-k8s.io/leaderworkerset: {kind: leaderworkerset, group: leaderworkerset.x-k8s.io, version: v1, plural: leaderworkersets, mutate: [CREATE, UPDATE], verbs: [get, list, watch]}
jobset.x-k8s.io/jobset: {kind: jobset, group: jobset.x-k8s.io, version: v1alpha2, plural: jobsets}
kubeflow.org/jaxjob: {kind: jaxjob, group: kubeflow.org, version: v1, plural: jaxjobs}
kubeflow.org/mpijob: {kind: mpijob, group: kubeflow.org, version: v2beta1, plural: mpijobs}
kubeflow.org/paddlejob: {kind: paddlejob, group: kubeflow.org, version: v1, plural: paddlejobs}
kubeflow.org/pytorchjob: {kind: pytorchjob, group: kubeflow.org, version: v1, plural: pytorchjobs}
kubeflow.org/tfjob: {kind: tfjob, group: kubeflow.org, version: v1, plural: tfjobs}
kubeflow.org/xgboostjob: {kind: xgboostjob, group: kubeflow.org, version: v1, plural: xgboostjobs}
ray.io/raycluster: {kind: raycluster, group: ray.io, version: v1, plural: rayclusters}
ray.io/rayjob: {kind: rayjob, group: ray.io, version: v1, plural: rayjobs}
ray.io/rayservice: {kind: rayservice, group: ray.io, version: v1, plural: rayservices}
trainer.kubeflow.org/trainjob: {kind: trainjob, group: trainer.kubeflow.org, version: v1alpha1, plural: trainjobs, reads: [trainingruntimes, clustertrainingruntimes]}
workload.codeflare.dev/appwrapper: {kind: appwrapper, group: workload.codeflare.dev, version: v1beta2, plural: appwrappers}
{{- end }}

{{- /* The enabled suspendable kinds, sorted by framework name (as the registry orders them), as a YAML list. */ -}}
{{- define "kuota.enabledKinds" -}}
{{- $known := include "kuota.integrationKinds" . | fromYaml }}
{{- $enabled := list }}
{{- range $name := (include "kuota.frameworks" . | fromYaml).names | uniq | sortAlpha }}
{{- if hasKey $known $name }}
{{- $enabled = append $enabled (get $known $name) }}
{{- end }}
{{- end }}
{{- toYaml (dict "kinds" $enabled) }}
{{- end }}

{{- /* Pods are gated for "pod" and for the pod parents (Kueue enables "pod" implicitly for them). */ -}}
{{- define "kuota.podsEnabled" -}}
{{- $names := (include "kuota.frameworks" . | fromYaml).names }}
{{- or (has "pod" $names) (has "deployment" $names) (has "statefulset" $names) (has "leaderworkerset.x-k8s.io/leaderworkerset" $names) }}
{{- end }}

{{- /* managerConfig.integrations.frameworks; absent: batch/job only, as in Kueue (an empty list: none). */ -}}
{{- define "kuota.frameworks" -}}
{{- $integrations := .Values.managerConfig.integrations | default dict }}
{{- toYaml (dict "names" (hasKey $integrations "frameworks" | ternary $integrations.frameworks (list "batch/job"))) }}
{{- end }}
