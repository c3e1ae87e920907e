package hostcluster

import (
	"fmt"
	"path/filepath"
	"strings"
)

// The configuration files of the node's parts. Each setting that is not a default says why.

func containerdConfig(runc, cniBinDir string) string {
	d := filepath.Join(workRoot, "containerd")
	return fmt.Sprintf(`version = 3
root = '%[1]s/root'
state = '%[1]s/state'
# NRI and tracing open sockets or exporters the node does not use.
disabled_plugins = ['io.containerd.nri.v1.nri', 'io.containerd.internal.v1.tracing', 'io.containerd.tracing.processor.v1.otlp']

[grpc]
  address = '%[1]s/containerd.sock'
[ttrpc]
  address = '%[1]s/containerd.sock.ttrpc'
[debug]
  address = ''
[metrics]
  address = ''

[plugins]
  [plugins.'io.containerd.internal.v1.opt']
    path = '%[1]s/opt'
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = 'overlayfs'
    # No registry is reachable: images are imported beforehand, never pulled.
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = 'registry.k8s.io/pause:3.10'
  [plugins.'io.containerd.cri.v1.runtime']
    # Pod network namespaces under the state directory, not /var/run/netns.
    netns_mounts_under_state_dir = true
    # This machine lacks CAP_SYS_RESOURCE: runc cannot lower oom_score_adj below the current
    # value (kubelet asks -998 for sandboxes) and fails "can't get final child's PID from pipe".
    restrict_oom_score_adj = true
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = 'runc'
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = 'io.containerd.runc.v2'
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          BinaryName = '%[2]s'
          # runc's state; its default is /run/containerd/runc.
          Root = '%[1]s/runc'
          SystemdCgroup = false
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = ['%[3]s']
      conf_dir = '%[4]s/cni/net.d'
      max_conf_num = 1
  [plugins.'io.containerd.grpc.v1.cri']
    stream_server_address = '127.0.0.1'
    stream_server_port = '0'
`, d, runc, cniBinDir, workRoot)
}

// cniConfig: pods on the bridge the test created, addresses from the node's range, a route to
// the Service range through the bridge and no default route, no masquerading: a pod reaches
// the node, other pods and Services, nothing beyond this machine.
func cniConfig() string {
	return fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "kobe-node",
  "plugins": [{
    "type": "bridge",
    "bridge": %q,
    "isGateway": true,
    "ipMasq": false,
    "hairpinMode": true,
    "ipam": {
      "type": "host-local",
      "ranges": [[{"subnet": %q, "rangeStart": %q, "rangeEnd": %q, "gateway": %q}]],
      "routes": [{"dst": %q}],
      "dataDir": %q
    }
  }]
}
`, bridgeName, podSubnet, podRangeStart, podRangeEnd, nodeIP, serviceCIDR, filepath.Join(workRoot, "cni", "ipam"))
}

func kubeletConfig(withDNS bool) string {
	dns := "clusterDNS: []"
	if withDNS {
		dns = "clusterDNS: [" + dnsIP + "]"
	}
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# cgroups are v1 (hybrid) here; kubelet 1.37 refuses them unless told.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /%[2]s
containerRuntimeEndpoint: unix://%[1]s/containerd/containerd.sock
address: %[3]s
port: 10250
readOnlyPort: 0
healthzPort: 0
tlsCertFile: %[1]s/pki/kubelet-serving.crt
tlsPrivateKeyFile: %[1]s/pki/kubelet-serving.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %[1]s/pki/ca.crt}
authorization: {mode: Webhook}
%[4]s
clusterDomain: cluster.local
# Pods get no search domains or servers of the host: nothing resolves beyond the cluster.
resolvConf: ""
failSwapOn: false
# Test machines are full of other work; the node must not evict or garbage-collect for it.
evictionHard: {memory.available: "1Mi", nodefs.available: "1%%", imagefs.available: "1%%", nodefs.inodesFree: "1%%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
makeIPTablesUtilChains: false
podLogsDir: %[1]s/kubelet/pod-logs
volumePluginDir: %[1]s/kubelet/volume-plugins
staticPodPath: ""
serializeImagePulls: false
nodeStatusUpdateFrequency: 4s
syncFrequency: 10s
shutdownGracePeriod: 0s
`, workRoot, cgroupRoot, nodeIP, dns)
}

func kubeProxyConfig(healthzPort, metricsPort int) string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: %[1]s/kubeconfigs/kube-proxy.kubeconfig
hostnameOverride: %[2]s
mode: iptables
bindAddress: %[3]s
healthzBindAddress: 127.0.0.1:%[4]d
metricsBindAddress: 127.0.0.1:%[5]d
clusterCIDR: %[6]s
detectLocalMode: ClusterCIDR
# NodePorts only on the node's bridge address; localhostNodePorts would set route_localnet.
nodePortAddresses: [%[3]s/32]
iptables:
  localhostNodePorts: false
  masqueradeAll: false
# Zeroes leave the conntrack sysctls alone.
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`, workRoot, nodeName, nodeIP, healthzPort, metricsPort, podSubnet)
}

// corednsManifests is cluster DNS for the node: CoreDNS answering for cluster.local from the
// API, and nothing else (no forwarding: names beyond the cluster do not resolve).
func corednsManifests(image string) []string {
	return []string{`apiVersion: v1
kind: ServiceAccount
metadata: {name: coredns, namespace: kube-system}`,
		`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: kobe:coredns}
rules:
- apiGroups: [""]
  resources: [endpoints, services, pods, namespaces]
  verbs: [list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [list, watch]`,
		`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: kobe:coredns}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: kobe:coredns}
subjects: [{kind: ServiceAccount, name: coredns, namespace: kube-system}]`,
		`apiVersion: v1
kind: ConfigMap
metadata: {name: coredns, namespace: kube-system}
data:
  Corefile: |
    .:53 {
        errors
        health :8080
        ready :8181
        kubernetes cluster.local in-addr.arpa ip6.arpa {
            pods insecure
            fallthrough in-addr.arpa ip6.arpa
        }
        cache 30
    }`,
		strings.ReplaceAll(`apiVersion: apps/v1
kind: Deployment
metadata: {name: coredns, namespace: kube-system, labels: {k8s-app: kube-dns}}
spec:
  replicas: 1
  selector: {matchLabels: {k8s-app: kube-dns}}
  template:
    metadata: {labels: {k8s-app: kube-dns}}
    spec:
      serviceAccountName: coredns
      dnsPolicy: Default
      terminationGracePeriodSeconds: 1
      containers:
      - name: coredns
        image: IMAGE
        imagePullPolicy: Never
        args: [-conf, /etc/coredns/Corefile]
        ports:
        - {name: dns, containerPort: 53, protocol: UDP}
        - {name: dns-tcp, containerPort: 53, protocol: TCP}
        readinessProbe:
          httpGet: {path: /ready, port: 8181}
          periodSeconds: 1
        volumeMounts: [{name: config, mountPath: /etc/coredns, readOnly: true}]
      volumes:
      - name: config
        configMap: {name: coredns, items: [{key: Corefile, path: Corefile}]}`, "IMAGE", image),
		`apiVersion: v1
kind: Service
metadata: {name: kube-dns, namespace: kube-system, labels: {k8s-app: kube-dns}}
spec:
  clusterIP: ` + dnsIP + `
  selector: {k8s-app: kube-dns}
  ports:
  - {name: dns, port: 53, protocol: UDP}
  - {name: dns-tcp, port: 53, protocol: TCP}`,
	}
}
