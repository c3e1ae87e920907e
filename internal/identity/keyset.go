package identity

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// keySet is an issuer's signing keys (its JWKS), fetched when first needed and cached. A token
// signed with a key id the cache does not hold makes it fetch again (the provider rotated its
// keys), but at most once per minRefresh, so that tokens with made-up key ids cannot turn kobe
// into a flood of requests to the provider. Keys older than maxAge are fetched again before
// use, so a key the provider withdrew stops being accepted; when that fetch fails they are used
// for staleGrace more at most, then verification fails (503) until the provider answers.
type keySet struct {
	url        string
	client     *http.Client
	algorithms []jose.SignatureAlgorithm
	minRefresh time.Duration
	maxAge     time.Duration
	staleGrace time.Duration
	now        func() time.Time

	mu      sync.Mutex
	keys    []jose.JSONWebKey
	keysAt  time.Time // of the last successful fetch
	tried   time.Time // of the last attempt, successful or not
	lastErr error     // of the last attempt
}

// VerifySignature implements oidc.KeySet: it checks a compact JWS against the issuer's keys
// and returns its payload.
func (k *keySet) VerifySignature(ctx context.Context, raw string) ([]byte, error) {
	jws, err := jose.ParseSignedCompact(raw, k.algorithms)
	if err != nil {
		return nil, fmt.Errorf("malformed token: %w", err)
	}
	if len(jws.Signatures) != 1 {
		return nil, errors.New("a token has exactly one signature")
	}
	kid := jws.Signatures[0].Header.KeyID
	keys, err := k.current(ctx, false)
	if err != nil {
		return nil, err
	}
	payload, found := verifyWith(jws, keys, kid)
	if payload != nil {
		return payload, nil
	}
	if !found {
		// An unknown key id: the provider may have rotated its keys.
		if keys, err = k.current(ctx, true); err != nil {
			return nil, err
		}
		if payload, found = verifyWith(jws, keys, kid); payload != nil {
			return payload, nil
		}
	}
	if !found {
		return nil, fmt.Errorf("the issuer's keys have no key id %q", kid)
	}
	return nil, errors.New("the signature does not verify")
}

// verifyWith tries the keys of the token's key id (every key when it names none); found says
// whether any key of that id exists.
func verifyWith(jws *jose.JSONWebSignature, keys []jose.JSONWebKey, kid string) (payload []byte, found bool) {
	for i := range keys {
		key := &keys[i]
		if kid != "" && key.KeyID != kid {
			continue
		}
		found = true
		if p, err := jws.Verify(key); err == nil {
			return p, true
		}
	}
	return nil, found
}

// current returns the cached keys, fetching them when there are none, when they are older
// than maxAge, or when refresh is asked; at most one attempt per minRefresh, so that neither
// tokens with made-up key ids nor a provider that is down turn into a flood of fetches. When
// the fetch of keys older than maxAge fails, they are still used for staleGrace (a provider's
// short outage does not stop every CI job), then not at all: a key the provider withdrew while
// it could not be reached is not trusted for ever.
func (k *keySet) current(ctx context.Context, refresh bool) ([]jose.JSONWebKey, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	now := k.now()
	stale := k.keys != nil && now.Sub(k.keysAt) >= k.maxAge
	if (k.keys == nil || stale || refresh) && now.Sub(k.tried) >= k.minRefresh {
		k.tried = now
		keys, err := k.fetch(ctx)
		if err == nil {
			k.keys, k.keysAt, k.lastErr = keys, now, nil
			return keys, nil
		}
		k.lastErr = err
		if refresh || k.keys == nil {
			return nil, fmt.Errorf("%w: fetching the issuer's keys: %v", errUnavailable, err)
		}
	}
	switch {
	case k.keys == nil:
		return nil, fmt.Errorf("%w: the issuer's keys (%s) could not be fetched a moment ago: %v", errUnavailable, k.url, k.lastErr)
	case stale && now.Sub(k.keysAt) >= k.maxAge+k.staleGrace:
		return nil, fmt.Errorf("%w: the issuer's keys (%s) were last fetched at %s, more than %s ago, and cannot be fetched again: %v",
			errUnavailable, k.url, k.keysAt.UTC().Format(time.RFC3339), k.maxAge+k.staleGrace, k.lastErr)
	}
	return k.keys, nil
}

// fetch reads the JWKS document and keeps its public signing keys.
func (k *keySet) fetch(ctx context.Context) ([]jose.JSONWebKey, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := k.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", k.url, resp.Status)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, fmt.Errorf("GET %s: not a JWKS document: %v", k.url, err)
	}
	keys := make([]jose.JSONWebKey, 0, len(set.Keys))
	for _, key := range set.Keys {
		if key.Use != "" && key.Use != "sig" {
			continue
		}
		if !key.IsPublic() || !key.Valid() {
			continue // symmetric (oct) keys and anything private are never verification keys here
		}
		keys = append(keys, key)
	}
	return keys, nil
}
