// Package kubeconfig writes the kubeconfig files kobe hands out: one cluster, one user and one
// context, named after the instance, written by client-go's clientcmd so that every client
// that reads kubeconfigs reads ours.
package kubeconfig

import (
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// ForClientCert returns a kubeconfig for server, trusting caPEM, authenticating with a client
// certificate. name names the cluster and the context.
func ForClientCert(name, server string, caPEM, certPEM, keyPEM []byte, user string) ([]byte, error) {
	return write(name, server, caPEM, user, &clientcmdapi.AuthInfo{ClientCertificateData: certPEM, ClientKeyData: keyPEM})
}

// ForToken returns a kubeconfig for server, trusting caPEM, authenticating with a bearer
// token. name names the cluster and the context; user names the kubeconfig's user entry.
func ForToken(name, server string, caPEM []byte, token, user string) ([]byte, error) {
	return write(name, server, caPEM, user, &clientcmdapi.AuthInfo{Token: token})
}

func write(name, server string, caPEM []byte, user string, auth *clientcmdapi.AuthInfo) ([]byte, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos[user] = auth
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: user}
	cfg.CurrentContext = name
	return clientcmd.Write(*cfg)
}
