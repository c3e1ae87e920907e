package capimgmt

import "strings"

// FastClass is a ClusterClass for CAPD's in-memory provider, shaped as the one CAPI's test
// module ships (clusterclass-in-memory.yaml) but with simulated machines that start in 1 s and
// components at once, so that a cluster is Available at the floor CAPI itself sets (its
// cluster cache retries a first failed connection after 30 s). It declares one variable,
// "flavour" (small or large), which no patch reads: enough for kobe's checks of variables.
const FastClass = "kobe-fast"

// FastClassManifest returns the class and its templates for namespace ns.
func FastClassManifest(ns string) []byte {
	return []byte(strings.ReplaceAll(fastClassYAML, "NAMESPACE", ns))
}

// FastMachineTemplateSpec is the spec of a DevMachineTemplate with fast in-memory machines,
// for the pass-through form (controlPlane.machineTemplateSpec).
const FastMachineTemplateSpec = `{"template":{"spec":{"backend":{"inMemory":{
  "vm":{"provisioning":{"startupDuration":"1s","startupJitter":"0"}},
  "node":{"provisioning":{"startupDuration":"0s","startupJitter":"0"}},
  "apiServer":{"provisioning":{"startupDuration":"0s","startupJitter":"0"}},
  "etcd":{"provisioning":{"startupDuration":"0s","startupJitter":"0"}}}}}}}`

const fastMachine = `
      backend:
        inMemory:
          vm:
            provisioning: {startupDuration: "1s", startupJitter: "0"}
          node:
            provisioning: {startupDuration: "0s", startupJitter: "0"}
          apiServer:
            provisioning: {startupDuration: "0s", startupJitter: "0"}
          etcd:
            provisioning: {startupDuration: "0s", startupJitter: "0"}`

var fastClassYAML = `apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
kind: DevClusterTemplate
metadata: {name: kobe-fast-cluster, namespace: NAMESPACE}
spec:
  template:
    spec:
      backend:
        inMemory: {}
---
apiVersion: controlplane.cluster.x-k8s.io/v1beta2
kind: KubeadmControlPlaneTemplate
metadata: {name: kobe-fast-control-plane, namespace: NAMESPACE}
spec:
  template:
    spec:
      kubeadmConfigSpec:
        clusterConfiguration:
          apiServer:
            certSANs: [localhost, 127.0.0.1]
---
apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
kind: DevMachineTemplate
metadata: {name: kobe-fast-control-plane, namespace: NAMESPACE}
spec:
  template:
    spec:` + fastMachine + `
---
apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
kind: DevMachineTemplate
metadata: {name: kobe-fast-worker, namespace: NAMESPACE}
spec:
  template:
    spec:` + fastMachine + `
---
apiVersion: bootstrap.cluster.x-k8s.io/v1beta2
kind: KubeadmConfigTemplate
metadata: {name: kobe-fast-worker, namespace: NAMESPACE}
spec:
  template:
    spec:
      joinConfiguration:
        nodeRegistration:
          criSocket: unix:///var/run/containerd/containerd.sock
---
apiVersion: cluster.x-k8s.io/v1beta2
kind: ClusterClass
metadata: {name: kobe-fast, namespace: NAMESPACE}
spec:
  controlPlane:
    machineInfrastructure:
      templateRef: {apiVersion: infrastructure.cluster.x-k8s.io/v1beta2, kind: DevMachineTemplate, name: kobe-fast-control-plane}
    templateRef: {apiVersion: controlplane.cluster.x-k8s.io/v1beta2, kind: KubeadmControlPlaneTemplate, name: kobe-fast-control-plane}
  infrastructure:
    templateRef: {apiVersion: infrastructure.cluster.x-k8s.io/v1beta2, kind: DevClusterTemplate, name: kobe-fast-cluster}
  workers:
    machineDeployments:
    - class: default-worker
      bootstrap:
        templateRef: {apiVersion: bootstrap.cluster.x-k8s.io/v1beta2, kind: KubeadmConfigTemplate, name: kobe-fast-worker}
      infrastructure:
        templateRef: {apiVersion: infrastructure.cluster.x-k8s.io/v1beta2, kind: DevMachineTemplate, name: kobe-fast-worker}
  variables:
  - name: flavour
    required: false
    schema:
      openAPIV3Schema:
        type: string
        enum: [small, large]
        default: small
`
