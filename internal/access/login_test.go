package access_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kunobi-ninja/kobe/internal/access"
)

func loginPolicy(login string) string {
	return `
roles:
  dev: {permissions: [lease]}
oidc:
  issuers:
  - issuer: https://idp.example.com
    audiences: [kobe-portal, kobe-cli]
    rules: [{role: dev}]
  login:
` + login
}

func TestLoginPolicy(t *testing.T) {
	p, err := access.ParsePolicy([]byte(loginPolicy(`    issuer: https://idp.example.com
    clientId: kobe-portal
    cliClientId: kobe-cli
    redirectUrl: https://kobe.example.com/ui/callback
    sessionTtl: 2h
`)))
	require.NoError(t, err)
	l := p.OIDC.Login
	assert.Equal(t, "2h0m0s", l.SessionTTLOrDefault().String())
	assert.Equal(t, []string{"openid", "email", "profile"}, l.ScopesOrDefault())

	bad := map[string]string{
		"is not one of oidc.issuers": `    issuer: https://other.example.com
    clientId: kobe-portal
    redirectUrl: https://kobe.example.com/ui/callback
`,
		"must contain the client id": `    issuer: https://idp.example.com
    clientId: someone-else
    redirectUrl: https://kobe.example.com/ui/callback
`,
		"clientId: required": `    issuer: https://idp.example.com
    redirectUrl: https://kobe.example.com/ui/callback
`,
		"ending in /ui/callback": `    issuer: https://idp.example.com
    clientId: kobe-portal
    redirectUrl: https://kobe.example.com/callback
`,
		"sessionTtl": `    issuer: https://idp.example.com
    clientId: kobe-portal
    redirectUrl: https://kobe.example.com/ui/callback
    sessionTtl: 30d
`,
		"unknown field": `    issuer: https://idp.example.com
    clientId: kobe-portal
    redirectUrl: https://kobe.example.com/ui/callback
    pkce: false
`,
	}
	for want, login := range bad {
		_, err := access.ParsePolicy([]byte(loginPolicy(login)))
		if assert.Error(t, err, want) {
			assert.True(t, strings.Contains(err.Error(), want), "%q does not say %q", err, want)
		}
	}
}
