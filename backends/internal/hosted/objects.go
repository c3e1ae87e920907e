package hosted

import (
	"fmt"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Labels on every object of an instance. Delete and Leftovers find an instance's objects by
// LabelInstance alone, in every namespace.
const (
	LabelInstance  = "kobe.kunobi.ninja/instance"
	LabelPool      = "kobe.kunobi.ninja/pool"
	LabelBackend   = "kobe.kunobi.ninja/backend"
	LabelComponent = "kobe.kunobi.ninja/component"
	// readyAnnotation on the CA Secret: when kobe first saw the instance Ready. Afterwards an
	// instance that does not serve is Unhealthy, not Creating.
	readyAnnotation = "kobe.kunobi.ninja/ready-at"
)

// Components (LabelComponent).
const (
	ComponentCA     = "ca"
	ComponentToken  = "token"
	ComponentConfig = "config"
	ComponentServer = "server"
	ComponentAgent  = "agent"
	ComponentAPI    = "api"
)

// Keys of the CA Secret holding the ServiceAccount key pair (Distro.ServiceAccountKeyFiles).
const (
	saKeyKey = "sa.key"
	saPubKey = "sa.pub"
)

// APIPort is the port of every instance's API, in the pod and on its Service.
const APIPort = 6443

// Names of an instance's objects.
func caSecretName(id string) string         { return id + "-ca" }
func tokenSecretName(id string) string      { return id + "-token" }
func configName(id string) string           { return id + "-config" }
func serverSetName(id string) string        { return id + "-server" }
func agentSetName(id string) string         { return id + "-agent" }
func serviceName(id string) string          { return id }
func serviceDNSName(id, ns string) string   { return serviceName(id) + "." + ns + ".svc" }
func pdbName(id string) string              { return id + "-server" }
func dataVolumeName() string                { return "data" }
func serverPodName(id string, i int) string { return fmt.Sprintf("%s-%d", serverSetName(id), i) }

func labels(d Distro, id, pool, component string) map[string]string {
	return map[string]string{LabelInstance: id, LabelPool: pool, LabelBackend: d.Name, LabelComponent: component}
}

func selector(id, component string) map[string]string {
	return map[string]string{LabelInstance: id, LabelComponent: component}
}

// renderService is the instance's API Service: port 6443 to the server pods.
func renderService(d Distro, id, pool string, p Parsed) *corev1.Service {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: serviceName(id), Namespace: p.Namespace, Labels: labels(d, id, pool, ComponentAPI)},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: selector(id, ComponentServer),
			Ports:    []corev1.ServicePort{{Name: "https", Port: APIPort, TargetPort: intstr.FromInt32(APIPort), Protocol: corev1.ProtocolTCP}},
			// Servers answer before they are Ready (joining servers, kobe's own API probe).
			PublishNotReadyAddresses: false,
		},
	}
	switch p.ExposeType {
	case ExposeNodePort:
		svc.Spec.Type = corev1.ServiceTypeNodePort
		if np := p.Cluster.Expose.NodePort; np != nil {
			svc.Spec.Ports[0].NodePort = *np
		}
	case ExposeLoadBalancer:
		svc.Spec.Type = corev1.ServiceTypeLoadBalancer
	}
	return svc
}

// renderConfig holds the distribution's configuration files (k0s.yaml), or nil. A Secret, not a
// ConfigMap: with a shared datastore the files hold its password.
func renderConfig(d Distro, id, pool string, in ServerInput) (*corev1.Secret, error) {
	if d.ConfigFiles == nil {
		return nil, nil
	}
	files, err := d.ConfigFiles(in)
	if err != nil || files == nil {
		return nil, err
	}
	data := map[string][]byte{}
	for k, v := range files {
		data[k] = []byte(v)
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: configName(id), Namespace: in.Namespace, Labels: labels(d, id, pool, ComponentConfig)},
		Data:       data,
	}, nil
}

func resourceRequirements(r *Resources) corev1.ResourceRequirements {
	var out corev1.ResourceRequirements
	if r == nil {
		return out
	}
	conv := func(m map[string]string) corev1.ResourceList {
		if len(m) == 0 {
			return nil
		}
		l := corev1.ResourceList{}
		for k, v := range m {
			l[corev1.ResourceName(k)] = resource.MustParse(v) // checked by ParseOptions
		}
		return l
	}
	out.Limits, out.Requests = conv(r.Limits), conv(r.Requests)
	return out
}

// caInitContainer copies the CA kobe made into the places in the data directory where the
// server takes it, before the server first starts. It runs in the server's image (k3s's and
// k0s's images carry a shell); copying every start is harmless (the same files).
func caInitContainer(d Distro, image string) corev1.Container {
	var script []string
	dirs := map[string]bool{}
	for _, f := range d.CAFiles {
		for _, p := range []string{f[0], f[1]} {
			dir := d.DataDir + "/" + p[:strings.LastIndex(p, "/")]
			if !dirs[dir] {
				dirs[dir] = true
				script = append(script, "mkdir -p "+dir)
			}
		}
		script = append(script,
			fmt.Sprintf("cp %s/tls.crt %s/%s", CADir, d.DataDir, f[0]),
			fmt.Sprintf("cp %s/tls.key %s/%s", CADir, d.DataDir, f[1]),
			fmt.Sprintf("chmod 0600 %s/%s", d.DataDir, f[1]))
	}
	if f := d.ServiceAccountKeyFiles; f != nil {
		for i, p := range f {
			dir := d.DataDir + "/" + p[:strings.LastIndex(p, "/")]
			if !dirs[dir] {
				dirs[dir] = true
				script = append(script, "mkdir -p "+dir)
			}
			script = append(script, fmt.Sprintf("cp %s/%s %s/%s", CADir, []string{saKeyKey, saPubKey}[i], d.DataDir, p))
		}
		script = append(script, fmt.Sprintf("chmod 0600 %s/%s", d.DataDir, f[0]))
	}
	return corev1.Container{
		Name: "kobe-ca", Image: image, ImagePullPolicy: PullPolicy,
		Command: []string{"sh", "-c", "set -e; " + strings.Join(script, "; ")},
		VolumeMounts: []corev1.VolumeMount{
			{Name: dataVolumeName(), MountPath: d.DataDir},
			{Name: "ca", MountPath: CADir, ReadOnly: true},
		},
	}
}

// renderServers is the StatefulSet of servers.
func renderServers(d Distro, id, pool, image string, in ServerInput) *appsv1.StatefulSet {
	p := in.Options
	lbl := labels(d, id, pool, ComponentServer)
	privileged := true // as upstream: a k3s/k0s server runs its own kubelet and containers
	grace := int64(10)
	mounts := []corev1.VolumeMount{
		{Name: dataVolumeName(), MountPath: d.DataDir},
		{Name: "token", MountPath: TokenDir, ReadOnly: true},
	}
	volumes := []corev1.Volume{
		{Name: "token", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: tokenSecretName(id), DefaultMode: ptr(int32(0o400))}}},
		{Name: "ca", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: caSecretName(id), DefaultMode: ptr(int32(0o400))}}},
	}
	if d.ConfigFiles != nil {
		mounts = append(mounts, corev1.VolumeMount{Name: "config", MountPath: d.ConfigDir, ReadOnly: true})
		volumes = append(volumes, corev1.Volume{Name: "config", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: configName(id), DefaultMode: ptr(int32(0o400))}}})
	}
	// $(POD_IP) in the command line: the server advertises its pod's address.
	env := []corev1.EnvVar{{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}}}
	if p.SharedDatastore != nil && d.DatastoreEnv != "" {
		// From the instance's Secret: the password is in no command line (ps) and no pod spec.
		env = append(env, corev1.EnvVar{Name: d.DatastoreEnv, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: datastoreSecretName(id)}, Key: endpointKey}}})
	}
	var claims []corev1.PersistentVolumeClaim
	if p.StorageType == StoragePVC {
		pvc := corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: dataVolumeName(), Labels: lbl},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: p.StorageSize}},
			},
		}
		if sc := p.Cluster.Persistence.StorageClassName; sc != "" {
			pvc.Spec.StorageClassName = &sc
		}
		claims = append(claims, pvc)
	} else {
		volumes = append(volumes, corev1.Volume{Name: dataVolumeName(), VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	}
	replicas := int32(p.Servers)
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: serverSetName(id), Namespace: p.Namespace, Labels: lbl},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            &replicas,
			ServiceName:         serviceName(id),
			PodManagementPolicy: appsv1.OrderedReadyPodManagement,
			Selector:            &metav1.LabelSelector{MatchLabels: selector(id, ComponentServer)},
			// The claims go with the instance (kobe also deletes them by label).
			PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
				WhenDeleted: appsv1.DeletePersistentVolumeClaimRetentionPolicyType,
				WhenScaled:  appsv1.DeletePersistentVolumeClaimRetentionPolicyType,
			},
			VolumeClaimTemplates: claims,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: lbl},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: &grace,
					AutomountServiceAccountToken:  ptr(false),
					EnableServiceLinks:            ptr(false),
					InitContainers:                []corev1.Container{caInitContainer(d, image)},
					Containers: []corev1.Container{{
						Name: d.Name, Image: image, ImagePullPolicy: PullPolicy,
						Command:         d.ServerCommand(in),
						Env:             env,
						Ports:           []corev1.ContainerPort{{Name: "https", ContainerPort: APIPort, Protocol: corev1.ProtocolTCP}},
						SecurityContext: &corev1.SecurityContext{Privileged: &privileged},
						Resources:       resourceRequirements(p.Resources),
						VolumeMounts:    mounts,
						// /readyz needs credentials; a TCP check says the API listens, and kobe's
						// own readiness asks the API with its admin credential.
						ReadinessProbe: &corev1.Probe{
							ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(APIPort)}},
							PeriodSeconds: 2, FailureThreshold: 3,
						},
					}},
					Volumes: volumes,
				},
			},
		},
	}
}

// renderAgents is the StatefulSet of agents (nodes of the instance), or nil.
func renderAgents(d Distro, id, pool, image string, in ServerInput) *appsv1.StatefulSet {
	p := in.Options
	if p.Agents == 0 || d.AgentCommand == nil {
		return nil
	}
	lbl := labels(d, id, pool, ComponentAgent)
	privileged := true
	grace := int64(10)
	replicas := int32(p.Agents)
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: agentSetName(id), Namespace: p.Namespace, Labels: lbl},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            &replicas,
			ServiceName:         serviceName(id),
			PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector:            &metav1.LabelSelector{MatchLabels: selector(id, ComponentAgent)},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: lbl},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: &grace,
					AutomountServiceAccountToken:  ptr(false),
					EnableServiceLinks:            ptr(false),
					Containers: []corev1.Container{{
						Name: d.Name + "-agent", Image: image, ImagePullPolicy: PullPolicy,
						Command:         d.AgentCommand(in),
						SecurityContext: &corev1.SecurityContext{Privileged: &privileged},
						Resources:       resourceRequirements(p.Resources),
						VolumeMounts: []corev1.VolumeMount{
							{Name: "token", MountPath: TokenDir, ReadOnly: true},
							{Name: "agent-data", MountPath: "/var/lib/rancher"},
						},
					}},
					Volumes: []corev1.Volume{
						{Name: "token", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: tokenSecretName(id), DefaultMode: ptr(int32(0o400))}}},
						{Name: "agent-data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
					},
				},
			},
		},
	}
}

// renderPDB keeps a quorum of servers through voluntary disruptions (node drains), or nil
// for a single server.
func renderPDB(d Distro, id, pool string, p Parsed) *policyv1.PodDisruptionBudget {
	if p.Servers < 2 {
		return nil
	}
	maxUnavailable := intstr.FromInt32(1)
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: pdbName(id), Namespace: p.Namespace, Labels: labels(d, id, pool, ComponentServer)},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: &maxUnavailable,
			Selector:       &metav1.LabelSelector{MatchLabels: selector(id, ComponentServer)},
		},
	}
}

// sans are the names and addresses a client may use: the Service's DNS names, its
// ClusterIP, and extra addresses (node addresses for a NodePort), sorted and unique.
func sans(id, namespace, clusterIP string, extra []string) []string {
	set := map[string]bool{}
	svc := serviceName(id)
	for _, s := range append([]string{svc, svc + "." + namespace, svc + "." + namespace + ".svc", svc + "." + namespace + ".svc.cluster.local", clusterIP}, extra...) {
		if s != "" && s != "None" {
			set[s] = true
		}
	}
	out := make([]string, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

func ptr[T any](v T) *T { return &v }
