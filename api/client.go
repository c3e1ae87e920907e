package api

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// Client is the typed Go client of the kobe API, used by the CLI and by tests.
type Client struct {
	BaseURL    string
	Token      string
	HTTPClient *http.Client
	// Retry bounds the retries of 503 and 429 rate_limited answers (zero value: the defaults).
	Retry RetryPolicy
}

// NewClient returns a client for the API at baseURL (e.g. http://127.0.0.1:8080).
func NewClient(baseURL string) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--server %q: want a URL such as http://127.0.0.1:8080", baseURL)
	}
	return &Client{BaseURL: strings.TrimRight(baseURL, "/"), HTTPClient: &http.Client{Timeout: 90 * time.Second}}, nil
}

// TLSOptions say how the client checks an https:// server's certificate. The zero value checks
// it against the system's certificate authorities.
type TLSOptions struct {
	// CAFile is a PEM bundle of the certificate authorities the server's certificate must chain
	// to, in place of the system's (kubectl's --certificate-authority).
	CAFile string
	// InsecureSkipVerify accepts any certificate: the connection is encrypted but the server
	// is not authenticated (kubectl's --insecure-skip-tls-verify).
	InsecureSkipVerify bool
}

// NewClientTLS is NewClient with the server's certificate checked as o says. Either option on
// an http:// URL, or both at once, is refused: neither would do what it says.
func NewClientTLS(baseURL string, o TLSOptions) (*Client, error) {
	c, err := NewClient(baseURL)
	if err != nil || o == (TLSOptions{}) {
		return c, err
	}
	if !strings.HasPrefix(strings.ToLower(baseURL), "https://") {
		return nil, fmt.Errorf("%s is not an https:// URL: a certificate authority or --insecure-skip-tls-verify applies to HTTPS only", baseURL)
	}
	if o.CAFile != "" && o.InsecureSkipVerify {
		return nil, errors.New("give a certificate authority or --insecure-skip-tls-verify, not both: the second would ignore the first")
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: o.InsecureSkipVerify}
	if o.CAFile != "" {
		pem, err := os.ReadFile(o.CAFile)
		if err != nil {
			return nil, fmt.Errorf("certificate authority: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("certificate authority %s: no PEM certificate in it", o.CAFile)
		}
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = cfg
	c.HTTPClient.Transport = transport
	return c, nil
}

// Error is a non-2xx answer, carrying the API's error envelope.
type Error struct {
	StatusCode int
	Body       ErrorBody
	// RetryAfter is the answer's Retry-After header (0 when absent).
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("%s (HTTP %d", e.Body.Error, e.StatusCode)
	if e.Body.Reason != "" {
		msg += ", reason " + string(e.Body.Reason)
	}
	msg += ")"
	if e.Body.Detail != "" {
		msg += ": " + e.Body.Detail
	}
	return msg
}

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	_, err := c.send(ctx, method, path, in, out)
	return err
}

// send makes one request and returns the answer's status code.
func (c *Client) send(ctx context.Context, method, path string, in, out any) (int, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.BaseURL+path, body)
	if err != nil {
		return 0, err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	hc := c.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("cannot reach the kobe API at %s: %w", c.BaseURL, unwrapURLError(err))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode >= 300 {
		apiErr := &Error{StatusCode: resp.StatusCode, RetryAfter: parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())}
		if json.Unmarshal(data, &apiErr.Body) != nil || apiErr.Body.Error == "" {
			apiErr.Body.Error = strings.TrimSpace(string(data))
			if apiErr.Body.Error == "" {
				apiErr.Body.Error = http.StatusText(resp.StatusCode)
			}
		}
		return resp.StatusCode, apiErr
	}
	if out == nil || resp.StatusCode == http.StatusNoContent {
		return resp.StatusCode, nil
	}
	if h, ok := out.(*withHeader); ok {
		h.header = resp.Header
		out = h.out
	}
	if err := json.Unmarshal(data, out); err != nil {
		return resp.StatusCode, fmt.Errorf("unexpected answer from %s%s: %w", c.BaseURL, path, err)
	}
	return resp.StatusCode, nil
}

// unwrapURLError drops the URL (the caller names the server) and says what to do about a
// certificate that could not be verified.
func unwrapURLError(err error) error {
	if ue, ok := err.(*url.Error); ok {
		err = ue.Err
	}
	var unverified *tls.CertificateVerificationError
	if errors.As(err, &unverified) {
		return fmt.Errorf("%w (give the certificate authority that signed it with --certificate-authority, or accept any certificate with --insecure-skip-tls-verify)", err)
	}
	return err
}

// Healthz calls /healthz and returns the round-trip time.
func (c *Client) Healthz(ctx context.Context) (time.Duration, error) {
	t0 := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.BaseURL+"/healthz", nil)
	if err != nil {
		return 0, err
	}
	hc := c.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("cannot reach the kobe API at %s: %w", c.BaseURL, unwrapURLError(err))
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("%s/healthz answered %s", c.BaseURL, resp.Status)
	}
	return time.Since(t0), nil
}

// Status calls GET /v1/status.
func (c *Client) Status(ctx context.Context) (Status, error) {
	var st Status
	err := c.do(ctx, http.MethodGet, "/v1/status", nil, &st)
	return st, err
}

// StartDoctor calls POST /v1/doctor.
func (c *Client) StartDoctor(ctx context.Context, hold time.Duration) (DoctorStarted, error) {
	req := DoctorRequest{}
	if hold > 0 {
		req.Hold = hold.String()
	}
	return c.StartDoctorRequest(ctx, req)
}

// StartDoctorRequest calls POST /v1/doctor with every field of the request (TemporalSettings:
// the answer lists the Temporal settings the bind depends on, which takes a few seconds more).
func (c *Client) StartDoctorRequest(ctx context.Context, req DoctorRequest) (DoctorStarted, error) {
	var out DoctorStarted
	err := c.do(ctx, http.MethodPost, "/v1/doctor", req, &out)
	return out, err
}

// GetDoctor calls GET /v1/doctor/{id}, long-polling up to wait for completion.
func (c *Client) GetDoctor(ctx context.Context, id string, wait time.Duration) (DoctorReport, error) {
	var out DoctorReport
	path := "/v1/doctor/" + url.PathEscape(id)
	if wait > 0 {
		path += "?wait=" + wait.String()
	}
	err := c.do(ctx, http.MethodGet, path, nil, &out)
	return out, err
}

// withHeader is an answer's body (out) and, once it came, its header.
type withHeader struct {
	out    any
	header http.Header
}
