{{/* Names: <release>-kobe, or the release's name when it already says kobe. */}}
{{- define "kobe.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "kobe.fullname" -}}
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

{{/* A name derived from the fullname: (list $ "suffix"). Kept within 63 characters. */}}
{{- define "kobe.child" -}}
{{- $root := index . 0 -}}
{{- printf "%s-%s" (include "kobe.fullname" $root | trunc 40 | trimSuffix "-") (index . 1) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "kobe.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "kobe.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Selector labels of one component: (list $ "api"). */}}
{{- define "kobe.selectorLabels" -}}
{{- $root := index . 0 -}}
app.kubernetes.io/name: {{ include "kobe.name" $root }}
app.kubernetes.io/instance: {{ $root.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{- define "kobe.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/*
The restricted Pod Security profile, on every pod and container: the image's user 65532, no
privilege escalation, no capabilities, the runtime's seccomp profile, a read-only root file
system (the pods write only to their emptyDir volumes).
*/}}
{{- define "kobe.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "kobe.containerSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
privileged: false
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* Secret names: the one given, else the one the chart makes. */}}
{{- define "kobe.storeSecret" -}}
{{- default (include "kobe.child" (list . "store")) .Values.store.existingSecret -}}
{{- end -}}
{{- define "kobe.sealingSecret" -}}
{{- default (include "kobe.child" (list . "sealing")) .Values.sealing.existingSecret -}}
{{- end -}}
{{- define "kobe.adminTokenSecret" -}}
{{- default (include "kobe.child" (list . "admin-token")) .Values.adminToken.existingSecret -}}
{{- end -}}
{{- define "kobe.apiTLSSecret" -}}
{{- default (include "kobe.child" (list . "api-tls")) .Values.api.tls.existingSecret -}}
{{- end -}}
{{- define "kobe.temporalClientSecret" -}}
{{- default (include "kobe.child" (list . "temporal-client")) .Values.temporal.tls.clientCertificate.existingSecret -}}
{{- end -}}
{{- define "kobe.temporalCASecret" -}}
{{- default (include "kobe.child" (list . "temporal-ca")) .Values.temporal.tls.ca.existingSecret -}}
{{- end -}}
{{- define "kobe.temporalAPIKeySecret" -}}
{{- default (include "kobe.child" (list . "temporal-api-key")) .Values.temporal.apiKey.existingSecret -}}
{{- end -}}
{{- define "kobe.metricsTokenSecret" -}}
{{- default (include "kobe.child" (list . "metrics-token")) .Values.metricsToken.existingSecret -}}
{{- end -}}

{{- define "kobe.temporalMTLS" -}}
{{- $c := .Values.temporal.tls.clientCertificate -}}
{{- if and .Values.temporal.tls.enabled (or $c.existingSecret $c.cert) }}true{{ end -}}
{{- end -}}
{{- define "kobe.temporalAPIKey" -}}
{{- if or .Values.temporal.apiKey.existingSecret .Values.temporal.apiKey.value }}true{{ end -}}
{{- end -}}
{{- define "kobe.temporalCA" -}}
{{- $c := .Values.temporal.tls.ca -}}
{{- if and .Values.temporal.tls.enabled (or $c.existingSecret $c.pem) }}true{{ end -}}
{{- end -}}

{{/*
Checks of what the schema cannot say: a setting that must come from exactly one place. Each
failure names the values to set.
*/}}
{{- define "kobe.validate" -}}
{{- if and .Values.store.dsn .Values.store.existingSecret -}}
{{- fail "store: set store.dsn or store.existingSecret, not both" -}}
{{- end -}}
{{- if not (or .Values.store.dsn .Values.store.existingSecret) -}}
{{- fail "store: set store.dsn (postgres://user:password@host:5432/kobe) or store.existingSecret (a Secret whose key store.existingSecretKey holds the DSN)" -}}
{{- end -}}
{{- if and .Values.sealing.key .Values.sealing.existingSecret -}}
{{- fail "sealing: set sealing.key or sealing.existingSecret, not both" -}}
{{- end -}}
{{- if not (or .Values.sealing.key .Values.sealing.existingSecret) -}}
{{- fail "sealing: set sealing.key (base64 of 32 random bytes: head -c 32 /dev/urandom | base64) or sealing.existingSecret; the API and every worker must share it" -}}
{{- end -}}
{{- if .Values.sealing.key -}}
{{- if ne (len (b64dec .Values.sealing.key)) 32 -}}
{{- fail "sealing.key: must be base64 of exactly 32 bytes (head -c 32 /dev/urandom | base64)" -}}
{{- end -}}
{{- end -}}
{{- if and .Values.adminToken.token .Values.adminToken.existingSecret -}}
{{- fail "adminToken: set adminToken.token or adminToken.existingSecret, not both" -}}
{{- end -}}
{{- if not .Values.temporal.address -}}
{{- fail "temporal.address: the host:port of the Temporal frontend kobe uses (required)" -}}
{{- end -}}
{{- $ct := .Values.temporal.tls.clientCertificate -}}
{{- if and $ct.existingSecret (or $ct.cert $ct.key) -}}
{{- fail "temporal.tls.clientCertificate: set existingSecret or cert and key, not both" -}}
{{- end -}}
{{- if ne (empty $ct.cert) (empty $ct.key) -}}
{{- fail "temporal.tls.clientCertificate: cert and key go together" -}}
{{- end -}}
{{- if and .Values.temporal.tls.ca.existingSecret .Values.temporal.tls.ca.pem -}}
{{- fail "temporal.tls.ca: set existingSecret or pem, not both" -}}
{{- end -}}
{{- if and (not .Values.temporal.tls.enabled) (or $ct.existingSecret $ct.cert .Values.temporal.tls.ca.existingSecret .Values.temporal.tls.ca.pem .Values.temporal.tls.serverName) -}}
{{- fail "temporal.tls: a certificate, CA or server name is given but temporal.tls.enabled is false" -}}
{{- end -}}
{{- if and .Values.temporal.apiKey.existingSecret .Values.temporal.apiKey.value -}}
{{- fail "temporal.apiKey: set existingSecret or value, not both" -}}
{{- end -}}
{{- if and (include "kobe.temporalAPIKey" .) (not .Values.temporal.tls.enabled) -}}
{{- fail "temporal.apiKey: an API key is sent only over TLS: set temporal.tls.enabled=true" -}}
{{- end -}}
{{- if .Values.api.tls.enabled -}}
{{- if and .Values.api.tls.existingSecret (or .Values.api.tls.cert .Values.api.tls.key) -}}
{{- fail "api.tls: set existingSecret or cert and key, not both" -}}
{{- end -}}
{{- if not (or .Values.api.tls.existingSecret (and .Values.api.tls.cert .Values.api.tls.key)) -}}
{{- fail "api.tls: set api.tls.existingSecret (a kubernetes.io/tls Secret, e.g. from cert-manager) or api.tls.cert and api.tls.key; or api.tls.enabled=false to serve plain HTTP behind a proxy that terminates TLS" -}}
{{- end -}}
{{- else if or .Values.api.tls.existingSecret .Values.api.tls.cert .Values.api.tls.key -}}
{{- fail "api.tls: a certificate is given but api.tls.enabled is false" -}}
{{- end -}}
{{- if .Values.metricsToken.enabled -}}
{{- if and .Values.metricsToken.token .Values.metricsToken.existingSecret -}}
{{- fail "metricsToken: set metricsToken.token or metricsToken.existingSecret, not both" -}}
{{- end -}}
{{- if not (or .Values.metricsToken.token .Values.metricsToken.existingSecret) -}}
{{- fail "metricsToken: set metricsToken.token or metricsToken.existingSecret" -}}
{{- end -}}
{{- end -}}
{{- if and .Values.api.ingress.enabled (not .Values.api.ingress.hosts) -}}
{{- fail "api.ingress.hosts: an enabled ingress needs at least one host" -}}
{{- end -}}
{{- $names := dict -}}
{{- $hosts := dict -}}
{{- range .Values.workers -}}
{{- if hasKey $names .name -}}
{{- fail (printf "workers: two entries are named %q" .name) -}}
{{- end -}}
{{- $_ := set $names .name true -}}
{{- $host := default "" .hostClusterName -}}
{{- if hasKey $hosts $host -}}
{{- fail (printf "workers: two entries serve the host cluster %q (one Deployment per host cluster; raise its replicas instead)" $host) -}}
{{- end -}}
{{- $_ := set $hosts $host true -}}
{{- end -}}
{{- end -}}

{{/*
The settings the API, the workers and the migration share: the store DSN in the environment
(never on the command line), logs.
*/}}
{{- define "kobe.storeEnv" -}}
- name: KOBE_STORE
  valueFrom:
    secretKeyRef:
      name: {{ include "kobe.storeSecret" . }}
      key: {{ .Values.store.existingSecretKey }}
- name: KOBE_LOG_FORMAT
  value: {{ .Values.log.format | quote }}
- name: KOBE_LOG_LEVEL
  value: {{ .Values.log.level | quote }}
{{- end -}}

{{/* Flags of `kobe server` and `kobe worker` for Temporal, the sealing key and /metrics. */}}
{{- define "kobe.commonArgs" -}}
- --temporal-address={{ .Values.temporal.address }}
- --temporal-namespace={{ .Values.temporal.namespace }}
- --task-queue={{ .Values.temporal.taskQueue }}
{{- if .Values.temporal.tls.enabled }}
- --temporal-tls-server-name={{ default (regexReplaceAll ":[0-9]+$" .Values.temporal.address "") .Values.temporal.tls.serverName }}
{{- end }}
{{- if include "kobe.temporalMTLS" . }}
- --temporal-tls-cert=/etc/kobe/temporal-client/tls.crt
- --temporal-tls-key=/etc/kobe/temporal-client/tls.key
{{- end }}
{{- if include "kobe.temporalCA" . }}
- --temporal-tls-ca=/etc/kobe/temporal-ca/ca.crt
{{- end }}
{{- if include "kobe.temporalAPIKey" . }}
- --temporal-api-key-file=/etc/kobe/temporal-api-key/api-key
{{- end }}
- --secret-key-file=/etc/kobe/sealing/secret.key
{{- if .Values.metricsToken.enabled }}
- --metrics-token-file=/etc/kobe/metrics-token/token
{{- end }}
{{- end -}}

{{- define "kobe.commonVolumeMounts" -}}
- name: tmp
  mountPath: /tmp
- name: sealing
  mountPath: /etc/kobe/sealing
  readOnly: true
{{- if include "kobe.temporalMTLS" . }}
- name: temporal-client
  mountPath: /etc/kobe/temporal-client
  readOnly: true
{{- end }}
{{- if include "kobe.temporalCA" . }}
- name: temporal-ca
  mountPath: /etc/kobe/temporal-ca
  readOnly: true
{{- end }}
{{- if include "kobe.temporalAPIKey" . }}
- name: temporal-api-key
  mountPath: /etc/kobe/temporal-api-key
  readOnly: true
{{- end }}
{{- if .Values.metricsToken.enabled }}
- name: metrics-token
  mountPath: /etc/kobe/metrics-token
  readOnly: true
{{- end }}
{{- end -}}

{{- define "kobe.commonVolumes" -}}
- name: tmp
  emptyDir:
    sizeLimit: 256Mi
- name: sealing
  secret:
    secretName: {{ include "kobe.sealingSecret" . }}
    defaultMode: 0440
    items:
      - key: {{ .Values.sealing.existingSecretKey }}
        path: secret.key
{{- if include "kobe.temporalMTLS" . }}
- name: temporal-client
  secret:
    secretName: {{ include "kobe.temporalClientSecret" . }}
    defaultMode: 0440
    items:
      - key: tls.crt
        path: tls.crt
      - key: tls.key
        path: tls.key
{{- end }}
{{- if include "kobe.temporalCA" . }}
- name: temporal-ca
  secret:
    secretName: {{ include "kobe.temporalCASecret" . }}
    defaultMode: 0444
    items:
      - key: {{ .Values.temporal.tls.ca.existingSecretKey }}
        path: ca.crt
{{- end }}
{{- if include "kobe.temporalAPIKey" . }}
- name: temporal-api-key
  secret:
    secretName: {{ include "kobe.temporalAPIKeySecret" . }}
    defaultMode: 0440
    items:
      - key: {{ .Values.temporal.apiKey.existingSecretKey }}
        path: api-key
{{- end }}
{{- if .Values.metricsToken.enabled }}
- name: metrics-token
  secret:
    secretName: {{ include "kobe.metricsTokenSecret" . }}
    defaultMode: 0440
    items:
      - key: {{ .Values.metricsToken.existingSecretKey }}
        path: token
{{- end }}
{{- end -}}

{{/* A checksum of the Secrets and ConfigMaps the chart makes: a change rolls the pods. */}}
{{- define "kobe.configChecksum" -}}
{{- $secrets := include (print $.Template.BasePath "/secrets.yaml") . -}}
{{- $policy := include (print $.Template.BasePath "/api-policy.yaml") . -}}
{{- printf "%s%s" $secrets $policy | sha256sum -}}
{{- end -}}

{{/* The scrape's bearer token, when /metrics requires one. */}}
{{- define "kobe.scrapeAuthorization" -}}
{{- if .Values.metricsToken.enabled -}}
authorization:
  type: Bearer
  credentials:
    name: {{ include "kobe.metricsTokenSecret" . }}
    key: {{ .Values.metricsToken.existingSecretKey }}
{{- end -}}
{{- end -}}

{{/* The egress rules of every kobe pod when networkPolicy.egress is set: DNS, then those. */}}
{{- define "kobe.networkPolicyEgress" -}}
{{- with .Values.networkPolicy.egress -}}
egress:
  - ports:
      - port: 53
        protocol: UDP
      - port: 53
        protocol: TCP
  {{- toYaml . | nindent 2 }}
{{- end -}}
{{- end -}}
