// Package goldentest is what the golden-template tests of the backends share: the addon whose
// objects every member of a golden pool must hold, and a client that sends one member's
// credential to another member's API server.
package goldentest

import (
	"fmt"
	"strings"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Manifest is a namespace golden, a ServiceAccount agent and a ConfigMap probe (data from:
// template) in it, and extra ConfigMaps extra-0… (addons that take a while to apply, for the
// measurements).
func Manifest(extra int) string {
	var sb strings.Builder
	sb.WriteString("apiVersion: v1\nkind: Namespace\nmetadata: {name: golden}\n---\n" +
		"apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: agent, namespace: golden}\n---\n" +
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: probe, namespace: golden}\ndata: {from: template}\n")
	for i := 0; i < extra; i++ {
		fmt.Fprintf(&sb, "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: extra-%d, namespace: golden}\ndata: {n: \"%d\"}\n", i, i)
	}
	return sb.String()
}

// Against is cfg's credential (client certificate or bearer token) sent to the API server at
// host, whose serving certificate is not checked: what that server says of the credential is
// the point.
func Against(cfg *rest.Config, host string) *kubernetes.Clientset {
	c := rest.CopyConfig(cfg)
	c.Host = host
	c.TLSClientConfig.CAData, c.TLSClientConfig.CAFile, c.TLSClientConfig.Insecure, c.TLSClientConfig.ServerName = nil, "", true, ""
	return kubernetes.NewForConfigOrDie(c)
}
