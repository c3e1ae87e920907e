// Package kubeconfig writes kubeconfig files for kobe-managed clusters.
package kubeconfig

import (
	"sigs.k8s.io/yaml"
)

// Config is the subset of the kubeconfig format kobe writes. []byte fields marshal as base64,
// which is what the *-data keys hold.
type Config struct {
	APIVersion     string         `json:"apiVersion"`
	Kind           string         `json:"kind"`
	Clusters       []NamedCluster `json:"clusters"`
	Users          []NamedUser    `json:"users"`
	Contexts       []NamedContext `json:"contexts"`
	CurrentContext string         `json:"current-context"`
}

type NamedCluster struct {
	Name    string  `json:"name"`
	Cluster Cluster `json:"cluster"`
}

type Cluster struct {
	Server                   string `json:"server"`
	CertificateAuthorityData []byte `json:"certificate-authority-data"`
}

type NamedUser struct {
	Name string `json:"name"`
	User User   `json:"user"`
}

type User struct {
	ClientCertificateData []byte `json:"client-certificate-data,omitempty"`
	ClientKeyData         []byte `json:"client-key-data,omitempty"`
	Token                 string `json:"token,omitempty"`
}

type NamedContext struct {
	Name    string  `json:"name"`
	Context Context `json:"context"`
}

type Context struct {
	Cluster string `json:"cluster"`
	User    string `json:"user"`
}

// ForClientCert returns a kubeconfig for server, trusting caPEM, authenticating with a client
// certificate. name names the cluster and the context.
func ForClientCert(name, server string, caPEM, certPEM, keyPEM []byte, user string) ([]byte, error) {
	cfg := Config{
		APIVersion:     "v1",
		Kind:           "Config",
		Clusters:       []NamedCluster{{Name: name, Cluster: Cluster{Server: server, CertificateAuthorityData: caPEM}}},
		Users:          []NamedUser{{Name: user, User: User{ClientCertificateData: certPEM, ClientKeyData: keyPEM}}},
		Contexts:       []NamedContext{{Name: name, Context: Context{Cluster: name, User: user}}},
		CurrentContext: name,
	}
	return yaml.Marshal(cfg)
}
