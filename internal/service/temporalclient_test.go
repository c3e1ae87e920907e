package service

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/kunobi-ninja/kobe/internal/config"
	"github.com/kunobi-ninja/kobe/internal/metrics"
	"github.com/kunobi-ninja/kobe/internal/pki"
)

// authCheckingFrontend stands in for a Temporal Cloud frontend's front door: TLS with a
// client certificate required, and an API key required on every call. It answers only the
// two calls kobe makes when it dials (GetSystemInfo, DescribeNamespace) and records what each
// call carried.
type authCheckingFrontend struct {
	workflowservice.UnimplementedWorkflowServiceServer
	validKeys map[string]bool

	mu      sync.Mutex
	bearers []string
	clients []string // client certificates' common names
}

func (f *authCheckingFrontend) check(ctx context.Context) error {
	md, _ := metadata.FromIncomingContext(ctx)
	auth := ""
	if v := md.Get("authorization"); len(v) > 0 {
		auth = v[0]
	}
	cn := ""
	if p, ok := peer.FromContext(ctx); ok {
		if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(ti.State.PeerCertificates) > 0 {
			cn = ti.State.PeerCertificates[0].Subject.CommonName
		}
	}
	f.mu.Lock()
	f.bearers, f.clients = append(f.bearers, auth), append(f.clients, cn)
	f.mu.Unlock()
	if !f.validKeys[auth] {
		// As Temporal's frontend answers: a gRPC PermissionDenied status.
		return serviceerror.ToStatus(serviceerror.NewPermissionDenied("request unauthorized", "")).Err()
	}
	return nil
}

func (f *authCheckingFrontend) last() (bearer, client string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.bearers[len(f.bearers)-1], f.clients[len(f.clients)-1]
}

func (f *authCheckingFrontend) GetSystemInfo(ctx context.Context, _ *workflowservice.GetSystemInfoRequest) (*workflowservice.GetSystemInfoResponse, error) {
	if err := f.check(ctx); err != nil {
		return nil, err
	}
	return &workflowservice.GetSystemInfoResponse{Capabilities: &workflowservice.GetSystemInfoResponse_Capabilities{}}, nil
}

func (f *authCheckingFrontend) DescribeNamespace(ctx context.Context, _ *workflowservice.DescribeNamespaceRequest) (*workflowservice.DescribeNamespaceResponse, error) {
	if err := f.check(ctx); err != nil {
		return nil, err
	}
	return &workflowservice.DescribeNamespaceResponse{}, nil
}

// kobe dials Temporal with mTLS and an API key together (as Temporal Cloud accepts): the client
// certificate and the key reach the frontend, a key rotated in its file is sent from the next
// call on without a new client, and a refused key stops the dial with a line naming the flag.
func TestDialTemporalSendsClientCertificateAndAPIKey(t *testing.T) {
	dir := t.TempDir()
	ca, err := pki.NewCA("temporal test CA", time.Hour)
	require.NoError(t, err)
	serving, err := ca.IssueServing("temporal", []string{"temporal.example"}, nil, time.Hour)
	require.NoError(t, err)
	clientCred, err := ca.IssueClient("kobe-worker", nil, time.Hour)
	require.NoError(t, err)
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p+".new", data, 0o600))
		require.NoError(t, os.Rename(p+".new", p)) // as a mounted Secret's update does
		return p
	}
	caFile := write("ca.pem", ca.CertPEM)
	certFile, keyFile := write("client.crt", clientCred.CertPEM), write("client.key", clientCred.KeyPEM)
	keyPath := write("api-key", []byte("key-one\n"))

	servingPair, err := tls.X509KeyPair(serving.CertPEM, serving.KeyPEM)
	require.NoError(t, err)
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(ca.CertPEM))
	frontend := &authCheckingFrontend{validKeys: map[string]bool{"Bearer key-one": true, "Bearer key-two": true}}
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{
		Certificates: []tls.Certificate{servingPair}, ClientCAs: roots, ClientAuth: tls.RequireAndVerifyClientCert,
	})))
	workflowservice.RegisterWorkflowServiceServer(srv, frontend)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)

	tc := config.TemporalConfig{
		TLSCertFile: certFile, TLSKeyFile: keyFile, TLSCAFile: caFile, TLSServerName: "temporal.example",
		APIKeyFile: keyPath,
	}
	ctx := context.Background()
	c, err := dialTemporal(ctx, tc, lis.Addr().String(), "kobe-ns", "worker", 10*time.Second, zap.NewNop(), metrics.NewSDKCollector())
	require.NoError(t, err)
	defer c.Close()
	bearer, cn := frontend.last()
	assert.Equal(t, "Bearer key-one", bearer)
	assert.Equal(t, "kobe-worker", cn, "the client certificate is presented")

	write("api-key", []byte("key-two\n"))
	_, err = c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: "kobe-ns"})
	require.NoError(t, err)
	bearer, _ = frontend.last()
	assert.Equal(t, "Bearer key-two", bearer, "the rotated key is sent without a new client")

	write("api-key", []byte(""))
	_, err = c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: "kobe-ns"})
	require.NoError(t, err, "a file emptied mid-rotation keeps the previous key in use")
	bearer, _ = frontend.last()
	assert.Equal(t, "Bearer key-two", bearer)

	write("api-key", []byte("revoked-key"))
	_, err = dialTemporal(ctx, tc, lis.Addr().String(), "kobe-ns", "worker", 10*time.Second, zap.NewNop(), metrics.NewSDKCollector())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--temporal-api-key-file")
	assert.NotContains(t, err.Error(), "\n")

	// Without a CA, an API key alone still means TLS: the server's certificate, signed by a CA
	// the system does not trust, is refused rather than the key sent in clear.
	_, err = dialTemporal(ctx, config.TemporalConfig{APIKeyFile: write("api-key", []byte("key-one"))},
		lis.Addr().String(), "kobe-ns", "worker", 3*time.Second, zap.NewNop(), metrics.NewSDKCollector())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "certificate")
}
