package cliconfig

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/oauth2"
)

// Login is an SSO credential of a context: the ID token `kobe login` got (sent as the bearer
// token) and the refresh token that gets the next one when it expires.
type Login struct {
	Issuer       string    `json:"issuer"`
	ClientID     string    `json:"client-id"`
	TokenURL     string    `json:"token-url"`
	IDToken      string    `json:"id-token"`
	Expiry       time.Time `json:"expiry"`
	RefreshToken string    `json:"refresh-token,omitempty"`
}

// refreshMargin: an ID token that expires sooner than this is refreshed before it is sent.
const refreshMargin = 30 * time.Second

// Fresh returns the credential's ID token, refreshing it first (and saving the context) when
// it is about to expire.
func (l *Login) Fresh(name string, c *Config, configPath string) (string, error) {
	if time.Until(l.Expiry) > refreshMargin {
		return l.IDToken, nil
	}
	if l.RefreshToken == "" {
		return "", errors.New("the SSO login expired and has no refresh token: run kobe login again")
	}
	cfg := &oauth2.Config{ClientID: l.ClientID, Endpoint: oauth2.Endpoint{TokenURL: l.TokenURL, AuthStyle: oauth2.AuthStyleInParams}}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	tok, err := cfg.TokenSource(ctx, &oauth2.Token{RefreshToken: l.RefreshToken, Expiry: time.Now().Add(-time.Second)}).Token()
	if err != nil {
		return "", fmt.Errorf("refreshing the SSO login at %s failed (run kobe login again): %w", l.Issuer, err)
	}
	if err := l.Update(tok); err != nil {
		return "", err
	}
	ctxv := c.Contexts[name]
	ctxv.Login = l
	c.Contexts[name] = ctxv
	if err := c.Save(configPath); err != nil {
		return "", err
	}
	return l.IDToken, nil
}

// Update takes a token response: its ID token, expiry and (rotated) refresh token.
func (l *Login) Update(tok *oauth2.Token) error {
	id, _ := tok.Extra("id_token").(string)
	if id == "" {
		return fmt.Errorf("%s answered without an ID token", l.Issuer)
	}
	l.IDToken, l.Expiry = id, tok.Expiry
	if exp, ok := jwtExpiry(id); ok {
		l.Expiry = exp
	}
	if tok.RefreshToken != "" {
		l.RefreshToken = tok.RefreshToken
	}
	return nil
}

// jwtExpiry reads the exp claim of the CLI's own ID token, unverified: only to know when to
// refresh it (the server verifies it).
func jwtExpiry(raw string) (time.Time, bool) {
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		return time.Time{}, false
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return time.Time{}, false
	}
	var c struct {
		Exp int64 `json:"exp"`
	}
	if json.Unmarshal(payload, &c) != nil || c.Exp == 0 {
		return time.Time{}, false
	}
	return time.Unix(c.Exp, 0), true
}
