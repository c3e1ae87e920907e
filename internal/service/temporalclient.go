package service

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kunobi-ninja/kobe/internal/config"
	"github.com/kunobi-ninja/kobe/internal/logging"
	"github.com/kunobi-ninja/kobe/internal/metrics"
)

// dialTemporal connects to Temporal and checks that the namespace exists, so that a wrong
// address, credential or namespace stops the start with one clear line.
func dialTemporal(ctx context.Context, tc config.TemporalConfig, addr, namespace, role string, timeout time.Duration, logger *zap.Logger, m *metrics.SDKCollector) (client.Client, error) {
	opts, err := temporalClientOptions(tc, addr, namespace, role, logger)
	if err != nil {
		return nil, err
	}
	opts.MetricsHandler = m.Handler()
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, err := client.DialContext(dctx, opts)
	if err != nil {
		if refused(err) {
			return nil, fmt.Errorf("Temporal at %s refused kobe (check --temporal-api-key-file or the client certificate): %s", addr, shortGRPCError(err))
		}
		return nil, fmt.Errorf("cannot reach Temporal at %s: %s", addr, shortGRPCError(err))
	}
	_, err = c.WorkflowService().DescribeNamespace(dctx, &workflowservice.DescribeNamespaceRequest{Namespace: namespace})
	if err != nil {
		c.Close()
		var nf *serviceerror.NamespaceNotFound
		if errors.As(err, &nf) {
			return nil, fmt.Errorf("Temporal at %s has no namespace %q (create it, or set --temporal-namespace)", addr, namespace)
		}
		if refused(err) {
			return nil, fmt.Errorf("Temporal at %s refused kobe on namespace %q (check --temporal-api-key-file or the client certificate): %s", addr, namespace, shortGRPCError(err))
		}
		return nil, fmt.Errorf("Temporal at %s: describing namespace %q: %s", addr, namespace, shortGRPCError(err))
	}
	return c, nil
}

// refused tells an authentication or authorization failure from an unreachable server.
func refused(err error) bool {
	// The SDK hands some calls' errors back as Temporal's service errors, others (its first
	// call, GetSystemInfo) as plain gRPC statuses.
	for _, code := range []codes.Code{serviceerror.ToStatus(err).Code(), status.Code(err)} {
		if code == codes.PermissionDenied || code == codes.Unauthenticated {
			return true
		}
	}
	return false
}

// temporalClientOptions is the one place that turns kobe's Temporal settings (address,
// namespace, TLS, mTLS, API key) into the SDK's options: kobe dev, server and worker all
// dial through it.
func temporalClientOptions(tc config.TemporalConfig, addr, namespace, role string, logger *zap.Logger) (client.Options, error) {
	host, _ := os.Hostname()
	opts := client.Options{
		HostPort:  addr,
		Namespace: namespace,
		Identity:  fmt.Sprintf("kobe-%s@%s:%d", role, host, os.Getpid()),
		Logger:    logging.NewSDKLogger(logger),
	}
	if tc.TLSEnabled() {
		tlsCfg, err := temporalTLS(tc)
		if err != nil {
			return client.Options{}, err
		}
		opts.ConnectionOptions.TLS = tlsCfg
	}
	if tc.APIKeyFile != "" {
		key, err := newAPIKeyFile(tc.APIKeyFile, logger)
		if err != nil {
			return client.Options{}, err
		}
		// The SDK turns TLS on (system CA bundle) when an API key comes without TLS settings:
		// a bearer token is never sent in clear.
		opts.Credentials = client.NewAPIKeyDynamicCredentials(key.Key)
	}
	return opts, nil
}

func temporalTLS(tc config.TemporalConfig) (*tls.Config, error) {
	cfg := &tls.Config{ServerName: tc.TLSServerName, MinVersion: tls.VersionTLS12}
	if tc.TLSCertFile != "" {
		cert, err := tls.LoadX509KeyPair(tc.TLSCertFile, tc.TLSKeyFile)
		if err != nil {
			return nil, fmt.Errorf("--temporal-tls-cert/--temporal-tls-key: %v", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	if tc.TLSCAFile != "" {
		pem, err := os.ReadFile(tc.TLSCAFile)
		if err != nil {
			return nil, fmt.Errorf("--temporal-tls-ca: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--temporal-tls-ca %s: no PEM certificates found", tc.TLSCAFile)
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}

// apiKeyFile hands the SDK the API key in a file, read again when the file changes, so that a
// rotated key (a Secret updated in place) is sent from the next call on without a restart.
// Each call costs one stat.
type apiKeyFile struct {
	path   string
	logger *zap.Logger

	mu   sync.Mutex
	seen fileVersion // of the file last read or tried
	key  string
}

// newAPIKeyFile reads the key once: a missing or empty file stops the start.
func newAPIKeyFile(path string, logger *zap.Logger) (*apiKeyFile, error) {
	v, err := versionOf(path)
	if err != nil {
		return nil, fmt.Errorf("--temporal-api-key-file: %v", err)
	}
	key, err := config.ReadAPIKeyFile(path)
	if err != nil {
		return nil, err
	}
	return &apiKeyFile{path: path, logger: logger, seen: v, key: key}, nil
}

// Key is the SDK's API-key callback. A file that changed but holds no usable key (being
// rewritten, removed) keeps the previous key in use; it is tried again once it changes again.
func (k *apiKeyFile) Key(context.Context) (string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	v, err := versionOf(k.path)
	if err != nil || v == k.seen {
		return k.key, nil
	}
	k.seen = v
	key, err := config.ReadAPIKeyFile(k.path)
	if err != nil {
		k.logger.Warn("the Temporal API key file changed but holds no key; sending the previous key", zap.Error(err))
		return k.key, nil
	}
	if key != k.key {
		k.logger.Info("sending Temporal the new API key from --temporal-api-key-file")
	}
	k.key = key
	return k.key, nil
}
