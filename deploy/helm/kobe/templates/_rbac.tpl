{{/*
What each backend does in its host cluster (or, for capi, its Cluster API management cluster)
through the Kubernetes API: exactly these resources and verbs, read from the backends' code
(backends/internal/hosted for k3s and k0s, backends/vcluster, backends/capi). docs/deploy.md,
"RBAC", lists the same rules; deploy/helm's TestWorkerRulesAreTheDocumentedOnes checks that the
two agree, and TestVclusterRulesCoverItsChart that the vcluster rules cover what the vcluster
chart's release creates and grants. Everything a backend does inside the clusters it creates
goes through that cluster's own admin credentials, not through these rules.

The rules are cluster-wide (a ClusterRole): the backends find an instance's objects by label in
every namespace (k3s and k0s keep instances in their pools' namespaces; vcluster makes one
namespace per instance; capi looks for a Cluster's objects in every namespace).
*/}}

{{/* k3s and k0s: an instance is a CA Secret, a token Secret, a config Secret, a Service, one or
two StatefulSets and a PodDisruptionBudget in the pool's namespace, found again by label. */}}
{{- define "kobe.rules.hosted" -}}
- apiGroups: [""]
  resources: [namespaces]
  verbs: [get]
- apiGroups: [""]
  resources: [nodes]
  verbs: [list]
- apiGroups: [""]
  resources: [secrets]
  verbs: [create, get, list, patch, delete]
- apiGroups: [""]
  resources: [services]
  verbs: [create, get, list, delete]
- apiGroups: [""]
  resources: [configmaps]
  verbs: [create, get, list, update, delete]
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, delete]
- apiGroups: [""]
  resources: [persistentvolumeclaims]
  verbs: [list, delete]
- apiGroups: [apps]
  resources: [statefulsets]
  verbs: [create, get, list, patch, delete]
- apiGroups: [policy]
  resources: [poddisruptionbudgets]
  verbs: [create, list, delete]
{{- end -}}

{{/* vcluster: one namespace per instance and a Helm release of the vcluster chart in it. The
rules hold what kobe does (namespaces, the release's storage Secrets, reading the instance's
Service, Secrets and pods, deleting what the release left cluster-wide), what Helm does with
the chart's objects (get, create, patch, delete), and what the chart's Role and ClusterRole
grant the syncer: Kubernetes lets a ServiceAccount grant only what it holds itself. */}}
{{- define "kobe.rules.vcluster" -}}
- apiGroups: [""]
  resources: [namespaces]
  verbs: [create, get, list, patch, delete]
- apiGroups: [""]
  resources: [configmaps, secrets, services, pods, pods/attach, pods/portforward, pods/exec, persistentvolumeclaims]
  verbs: [create, delete, patch, update, get, list, watch]
- apiGroups: [""]
  resources: [pods/status, pods/ephemeralcontainers, pods/resize]
  verbs: [patch, update]
- apiGroups: [""]
  resources: [serviceaccounts]
  verbs: [create, get, patch, delete]
- apiGroups: [""]
  resources: [endpoints]
  verbs: [create, delete, patch, update, get, list, watch]
- apiGroups: [""]
  resources: [pods/log]
  verbs: [get, list, watch]
- apiGroups: [""]
  resources: [events]
  verbs: [create, get, list, watch]
- apiGroups: [events.k8s.io]
  resources: [events]
  verbs: [create, get, list, watch]
- apiGroups: [""]
  resources: [persistentvolumes]
  verbs: [get, list, delete]
- apiGroups: [apps]
  resources: [statefulsets]
  verbs: [create, delete, get, list, watch, patch, update]
- apiGroups: [apps]
  resources: [replicasets, deployments]
  verbs: [get, list, watch, patch, update]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [create, list, get, delete, patch, update, watch]
- apiGroups: [rbac.authorization.k8s.io]
  resources: [roles, rolebindings]
  verbs: [create, get, patch, delete]
- apiGroups: [rbac.authorization.k8s.io]
  resources: [clusterroles, clusterrolebindings]
  verbs: [create, get, list, patch, delete]
- apiGroups: [snapshot.storage.k8s.io]
  resources: [volumesnapshots, volumesnapshotcontents]
  verbs: [create, delete, patch, update, get, list]
- apiGroups: [snapshot.storage.k8s.io]
  resources: [volumesnapshotclasses]
  verbs: [get, list]
{{- end -}}

{{/* capi: a Cluster (and, in the pass-through form, its infrastructure, machine template and
KubeadmControlPlane) in the pool's namespace of the management cluster; its kubeconfig and CA
Secrets; and, until a delete is verified, every object of the Cluster API groups labelled with
it. A provider whose objects are in another API group needs that group in the worker's
extraRules. */}}
{{- define "kobe.rules.capi" -}}
- apiGroups: [""]
  resources: [namespaces]
  verbs: [get]
- apiGroups: [""]
  resources: [secrets]
  verbs: [get, list]
- apiGroups: [cluster.x-k8s.io]
  resources: [clusters]
  verbs: [create, get, list, patch, delete]
- apiGroups: [cluster.x-k8s.io]
  resources: [clusterclasses]
  verbs: [get, list]
- apiGroups: [infrastructure.cluster.x-k8s.io, controlplane.cluster.x-k8s.io]
  resources: ["*"]
  verbs: [create, list]
- apiGroups: [cluster.x-k8s.io, bootstrap.cluster.x-k8s.io, addons.cluster.x-k8s.io, ipam.cluster.x-k8s.io, runtime.cluster.x-k8s.io]
  resources: ["*"]
  verbs: [list]
{{- end -}}

{{/* The rule set of a backend: k3s and k0s share theirs. */}}
{{- define "kobe.ruleSet" -}}
{{- if or (eq . "k3s") (eq . "k0s") -}}hosted{{- else -}}{{ . }}{{- end -}}
{{- end -}}

{{/* The rules of one worker entry: (list $ $worker). */}}
{{- define "kobe.workerRules" -}}
{{- $worker := index . 1 -}}
{{- $sets := list -}}
{{- range $worker.backends -}}
{{- $sets = append $sets (include "kobe.ruleSet" .) -}}
{{- end -}}
{{- range ($sets | uniq | sortAlpha) }}
{{ include (printf "kobe.rules.%s" .) . }}
{{- end }}
{{- with $worker.extraRules }}
{{ toYaml . }}
{{- end }}
{{- end -}}
