package datastore

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// natsServer provisions on NATS with JetStream. An instance gets its own key-value bucket;
// it connects with the operator's credentials (NATS has no users that a client can create:
// users and accounts live in the server's configuration or, in operator mode, in account JWTs
// signed by the operator's keys). So the isolation is by bucket name only: the DSN of one
// instance can open every bucket of the account. See docs/backends.md.
type natsServer struct {
	admin *url.URL
	// params are the kine query parameters passed on to every instance's DSN.
	params url.Values
}

// natsParams are the query parameters of an admin URL that kine reads and that are passed on
// unchanged; bucket is kobe's to choose, and the embedded-server ones make no sense here.
var natsParams = []string{"replicas", "revHistory", "slowMethod", "credsFile"}

func newNATS(adminURL string) (*natsServer, error) {
	if strings.Contains(adminURL, ",") {
		return nil, errors.New("several NATS URLs (a comma-separated list) are not supported: give one")
	}
	u, err := url.Parse(adminURL)
	if err != nil {
		return nil, errors.New("not a valid URL")
	}
	if u.Host == "" {
		return nil, errors.New("missing host (nats://host:4222)")
	}
	if u.Path != "" && u.Path != "/" {
		return nil, fmt.Errorf("path %q: a NATS URL has none", u.Path)
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, errors.New("query is not valid")
	}
	params := url.Values{}
	for k, v := range q {
		if !contains(natsParams, k) {
			return nil, fmt.Errorf("query parameter %q is not supported (kobe sets bucket; passed on: %s)", k, strings.Join(natsParams, ", "))
		}
		params[k] = v
	}
	return &natsServer{admin: u, params: params}, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (n *natsServer) nameLimit() int { return natsNameLimit }

func (n *natsServer) connect(ctx context.Context) (*nats.Conn, jetstream.JetStream, error) {
	opts := []nats.Option{nats.Name("kobe datastore"), nats.Timeout(10 * time.Second), nats.MaxReconnects(0)}
	if u := n.admin.User; u != nil {
		if pw, ok := u.Password(); ok {
			opts = append(opts, nats.UserInfo(u.Username(), pw))
		} else {
			opts = append(opts, nats.Token(u.Username()))
		}
	}
	if f := n.params.Get("credsFile"); f != "" {
		opts = append(opts, nats.UserCredentials(f))
	}
	nc, err := nats.Connect("nats://"+n.admin.Host, opts...)
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}

func (n *natsServer) ping(ctx context.Context) error {
	nc, js, err := n.connect(ctx)
	if err != nil {
		return err
	}
	defer nc.Close()
	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := js.AccountInfo(actx); err != nil {
		return fmt.Errorf("JetStream: %w (kine needs a server with JetStream enabled, nats-server -js)", err)
	}
	return nil
}

// provision checks that JetStream answers and returns the DSN naming the instance's bucket.
// kine creates the bucket on its first start, with the stream configuration it expects; a
// bucket created here with another configuration would make kine's create fail.
func (n *natsServer) provision(ctx context.Context, name, _ string) (DSN, error) {
	if err := checkName(name); err != nil {
		return DSN{}, err
	}
	if err := n.ping(ctx); err != nil {
		return DSN{}, err
	}
	u := url.URL{Scheme: "nats", User: n.admin.User, Host: n.admin.Host}
	// noEmbed: a kine or k3s built with embedded NATS would otherwise start its own server.
	query := "bucket=" + name + "&noEmbed"
	if len(n.params) > 0 {
		query += "&" + n.params.Encode()
	}
	u.RawQuery = query
	return NewDSN(u.String()), nil
}

func (n *natsServer) drop(ctx context.Context, name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	nc, js, err := n.connect(ctx)
	if err != nil {
		return err
	}
	defer nc.Close()
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := js.DeleteKeyValue(dctx, name); err != nil && !errors.Is(err, jetstream.ErrBucketNotFound) && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("deleting bucket %s: %w", name, err)
	}
	return nil
}

func (n *natsServer) objects(ctx context.Context, prefix string) ([]string, error) {
	nc, js, err := n.connect(ctx)
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	names := js.KeyValueStoreNames(lctx)
	var out []string
	for b := range names.Name() {
		if strings.HasPrefix(b, prefix) {
			out = append(out, "bucket "+b)
		}
	}
	if err := names.Error(); err != nil {
		return nil, err
	}
	sort.Strings(out)
	return out, nil
}
