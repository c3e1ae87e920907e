package pki

import (
	"fmt"
	"net"
	"time"
)

// ClusterPKI is everything a Kubernetes API server of one instance needs.
type ClusterPKI struct {
	CA      *CA
	Serving Credential
	// ServiceAccountPublicPEM verifies and ServiceAccountPrivatePEM signs service-account tokens.
	ServiceAccountPublicPEM  []byte
	ServiceAccountPrivatePEM []byte
	// Admin is a client certificate in group system:masters.
	Admin Credential
}

// AdminUser and AdminGroup are the identity of the admin credential kobe keeps per instance.
const (
	AdminUser  = "kobe-admin"
	AdminGroup = "system:masters"
)

// DefaultServiceIP is the first address of the service CIDR kobe's clusters use (10.0.0.0/24):
// in-cluster clients reach the API server as kubernetes.default on it, so it must be in the SANs.
var DefaultServiceIP = net.IPv4(10, 0, 0, 1)

// NewClusterPKI issues a cluster's CA, serving certificate, service-account keys and admin
// credential. hosts and ips are added to the serving certificate's SANs beside the in-cluster names.
func NewClusterPKI(clusterName string, hosts []string, ips []net.IP, validity time.Duration) (*ClusterPKI, error) {
	return NewClusterPKIWithCA(clusterName, hosts, ips, validity, validity)
}

// NewClusterPKIWithCA is NewClusterPKI with a CA that lives caValidity, longer than the serving
// and admin certificates (validity), so that they can be re-issued from it in place.
func NewClusterPKIWithCA(clusterName string, hosts []string, ips []net.IP, caValidity, validity time.Duration) (*ClusterPKI, error) {
	ca, err := NewCA("kobe-"+clusterName+"-ca", caValidity)
	if err != nil {
		return nil, fmt.Errorf("cluster CA: %w", err)
	}
	serving, err := ca.IssueAPIServer(hosts, ips, validity)
	if err != nil {
		return nil, fmt.Errorf("serving certificate: %w", err)
	}
	saPub, saPriv, err := NewSigningKey()
	if err != nil {
		return nil, fmt.Errorf("service-account key: %w", err)
	}
	admin, err := ca.IssueClient(AdminUser, []string{AdminGroup}, validity)
	if err != nil {
		return nil, fmt.Errorf("admin certificate: %w", err)
	}
	return &ClusterPKI{CA: ca, Serving: serving, ServiceAccountPublicPEM: saPub, ServiceAccountPrivatePEM: saPriv, Admin: admin}, nil
}

// IssueAPIServer issues a kube-apiserver serving certificate: the loopback and in-cluster names
// and addresses, plus hosts and ips.
func (ca *CA) IssueAPIServer(hosts []string, ips []net.IP, validity time.Duration) (Credential, error) {
	dns := append([]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
		"kubernetes.default.svc.cluster.local"}, hosts...)
	allIPs := append([]net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback, DefaultServiceIP}, ips...)
	return ca.IssueServing("kube-apiserver", dns, allIPs, validity)
}
