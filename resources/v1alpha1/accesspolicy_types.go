package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AccessPolicy says who may lease what: the bearer tokens it trusts (an OpenID Connect
// issuer's, upstream's, or a Kubernetes cluster's ServiceAccount tokens), how a token's claims
// name its holder, and rules, tried first to last, giving the first matching token a role with
// its pools and limits. Kobe adds roles (permissions, quotas, rate limits) beside upstream's
// rules. Cluster-scoped: a policy is kobe's, not a namespace's.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,categories=kobe
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Issuer",type=string,JSONPath=`.spec.auth.oidc.issuer`
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.auth.serviceAccount.cluster`
// +kubebuilder:printcolumn:name="Identity",type=string,JSONPath=`.spec.identity`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type AccessPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec   AccessPolicySpec   `json:"spec"`
	Status AccessPolicyStatus `json:"status,omitempty"`
}

// AccessPolicyList is a list of AccessPolicies.
//
// +kubebuilder:object:root=true
type AccessPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []AccessPolicy `json:"items"`
}

// AccessPolicySpec is upstream's AccessPolicy (auth, identity, rules) plus kobe's roles.
//
// +kubebuilder:validation:XValidation:rule="!has(self.auth) || (has(self.rules) && size(self.rules) > 0)",fieldPath=".rules",message="spec.rules: at least one rule is required with spec.auth (a token no rule matches is refused)"
// +kubebuilder:validation:XValidation:rule="has(self.auth) || has(self.roles)",message="give spec.auth with its rules, spec.roles, or both"
// +kubebuilder:validation:XValidation:rule="has(self.auth) || !has(self.rules)",fieldPath=".rules",message="spec.rules match tokens of spec.auth, which is not given"
// +kubebuilder:validation:XValidation:rule="has(self.auth) || !has(self.identity)",fieldPath=".identity",message="spec.identity names the holders of spec.auth's tokens, which is not given"
type AccessPolicySpec struct {
	// Auth is how the bearer tokens this policy trusts are verified.
	// +optional
	Auth *PolicyAuth `json:"auth,omitempty"`
	// Identity makes a token holder's name from its claims: {claim}, or {a.b.c} for a nested
	// one, e.g. repo:{repository}:ref:{ref} or {email} (default {sub}). Leases are the
	// holder's: two tokens of one identity see the same leases.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	Identity string `json:"identity,omitempty"`
	// Rules are tried first to last; the first whose match holds decides.
	// +kubebuilder:validation:MaxItems=100
	// +optional
	Rules []AccessRule `json:"rules,omitempty"`
	// Roles this policy defines, by name: what their holders may do, and how much. A kobe addition.
	// +kubebuilder:validation:MaxProperties=50
	// +kubebuilder:validation:XValidation:rule="self.all(name, name.size() > 0 && name.size() <= 63 && !name.contains(' ') && !name.contains(':'))",message="a role name is a word of at most 63 characters without spaces or colons"
	// +optional
	Roles map[string]Role `json:"roles,omitempty"`
}

// PolicyAuth is how tokens are verified: exactly one method.
//
// +kubebuilder:validation:XValidation:rule="has(self.oidc) != has(self.serviceAccount)",message="give exactly one of oidc or serviceAccount"
type PolicyAuth struct {
	// OIDC trusts the JWTs of one OpenID Connect issuer (e.g. GitHub Actions).
	// +optional
	OIDC *OIDCAuth `json:"oidc,omitempty"`
	// ServiceAccount trusts the ServiceAccount tokens of a Kubernetes cluster, each checked by
	// a TokenReview against that cluster and bound to an audience. Their claims for the rules
	// and the identity: sub (system:serviceaccount:<namespace>:<name>),
	// kubernetes.io.namespace and kubernetes.io.serviceaccount.name. A kobe addition.
	// +optional
	ServiceAccount *ServiceAccountAuth `json:"serviceAccount,omitempty"`
}

// OIDCAuth is one trusted OpenID provider.
type OIDCAuth struct {
	// Issuer is the provider's issuer URL, exactly as its tokens' iss claim spells it.
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() in ['http', 'https'] && size(url(self).getHost()) > 0 && !self.contains('#')",message="must be an http(s) URL without a fragment"
	// +required
	Issuer string `json:"issuer"`
	// JWKSURL is where the signing keys are (default: the jwks_uri of the issuer's discovery document).
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() in ['http', 'https'] && size(url(self).getHost()) > 0",message="must be an http(s) URL"
	// +optional
	JWKSURL string `json:"jwksUrl,omitempty"`
	// Audience: a token's aud must name at least one of them (GitHub Actions: kobe-system).
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=20
	// +required
	Audience []string `json:"audience"`
	// Algorithms a token may be signed with (default both).
	// +kubebuilder:validation:MaxItems=2
	// +optional
	Algorithms []SigningAlgorithm `json:"algorithms,omitempty"`
	// AuthorizedParties: when set, a token's azp must be one of them. A kobe addition.
	// +kubebuilder:validation:MaxItems=20
	// +optional
	AuthorizedParties []string `json:"authorizedParties,omitempty"`
	// ClockSkew tolerated on exp, nbf and iat (default 30s, at most 5m). A kobe addition.
	// +kubebuilder:validation:XValidation:rule="!self.matches('^(0|(([0-9]+([.][0-9]*)?|[.][0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$') || duration(self) <= duration('5m')",message="must be at most 5m"
	// +optional
	ClockSkew Duration `json:"clockSkew,omitempty"`
	// PrincipalPrefix starts the name of every holder of this issuer's tokens (default the
	// issuer's URL and #). A kobe addition.
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches(r'^[^\\s]*[:#/@]$')",message="must be at most 64 characters without spaces, ending in ':', '#', '/' or '@' (e.g. gha:)"
	// +optional
	PrincipalPrefix string `json:"principalPrefix,omitempty"`
}

// SigningAlgorithm of a token: symmetric ones (HS*) and none are refused, since a symmetric
// key would be shared with every verifier.
//
// +kubebuilder:validation:Enum=RS256;ES256
type SigningAlgorithm string

// ServiceAccountAuth trusts the ServiceAccount tokens of one Kubernetes cluster.
type ServiceAccountAuth struct {
	// Cluster names the cluster whose API server reviews the tokens: a host cluster kobe's
	// workers know by that name (--host-cluster-name).
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +required
	Cluster string `json:"cluster"`
	// Audience the tokens must be bound to (a projected token's audience), at least one.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=20
	// +required
	Audience []string `json:"audience"`
}

// AccessRule gives the tokens it matches a role with its pools and limits.
type AccessRule struct {
	// Match is the claim condition; absent, the rule matches every identity.
	// +optional
	Match *ClaimMatch `json:"match,omitempty"`
	// Role names a role (of this policy, or kobe's policy file) whose permissions, quota and
	// rate limit apply; absent, the rule lets its holders lease (lease, pool.read), as
	// upstream's rules do. A kobe addition.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Role string `json:"role,omitempty"`
	// Pools the holder may lease from, as globs such as e2e-*; absent, the role's.
	// +kubebuilder:validation:MaxItems=100
	// +optional
	Pools []string `json:"pools,omitempty"`
	// MaxTTL caps a lease's TTL and extensions; absent, the role's.
	// +kubebuilder:validation:XValidation:rule="!self.matches('^(0|(([0-9]+([.][0-9]*)?|[.][0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$') || duration(self) > duration('0s')",message="must be a positive duration"
	// +optional
	MaxTTL Duration `json:"maxTtl,omitempty"`
	// MaxConcurrentLeases per identity; 0 or absent, the role's.
	// +kubebuilder:validation:Minimum=0
	// +optional
	MaxConcurrentLeases int `json:"maxConcurrentLeases,omitempty"`
	// MaxExtensions per lease; absent, the role's.
	// +kubebuilder:validation:Minimum=0
	// +optional
	MaxExtensions *int `json:"maxExtensions,omitempty"`
}

// ClaimMatch holds when the token's claim matches value, a glob; a list claim matches when
// one of its items does.
type ClaimMatch struct {
	// Claim is a claim's name, or a dot path to a nested one.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +required
	Claim string `json:"claim"`
	// Value is a glob (e.g. my-org/*) the claim's value must match.
	// +kubebuilder:validation:MaxLength=1024
	// +required
	Value string `json:"value"`
}

// Role is what the holders of a role may do, and how much (kobe's policy file's roles).
type Role struct {
	// Permissions the role holds.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=5
	// +required
	Permissions []Permission `json:"permissions"`
	// Pools the role may lease from, as globs; absent, every pool.
	// +kubebuilder:validation:MaxItems=100
	// +optional
	Pools []string `json:"pools,omitempty"`
	// MaxTTL caps a lease's TTL and extensions (also capped by the pool's maxTtl).
	// +kubebuilder:validation:XValidation:rule="!self.matches('^(0|(([0-9]+([.][0-9]*)?|[.][0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$') || duration(self) > duration('0s')",message="must be a positive duration"
	// +optional
	MaxTTL Duration `json:"maxTtl,omitempty"`
	// MaxExtensions caps a lease's extensions (also capped by the pool's).
	// +kubebuilder:validation:Minimum=0
	// +optional
	MaxExtensions *int `json:"maxExtensions,omitempty"`
	// MaxConcurrentLeases per holder; 0 or absent, no limit.
	// +kubebuilder:validation:Minimum=0
	// +optional
	MaxConcurrentLeases int `json:"maxConcurrentLeases,omitempty"`
	// Quota is the aggregate of active leases of all holders of the role; 0 or absent, no limit.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Quota int `json:"quota,omitempty"`
	// RateLimit per holder (default 20 requests per second, burst 40).
	// +optional
	RateLimit *RateLimit `json:"rateLimit,omitempty"`
}

// Permission a role may hold.
//
// +kubebuilder:validation:Enum=lease;pool.read;pool.admin;audit.read;tokens
type Permission string

// RateLimit is a token bucket.
type RateLimit struct {
	// +kubebuilder:validation:ExclusiveMinimum=true
	// +kubebuilder:validation:Minimum=0
	// +required
	RequestsPerSecond float64 `json:"requestsPerSecond"`
	// +kubebuilder:validation:Minimum=1
	// +required
	Burst int `json:"burst"`
}

// AccessPolicyStatus says whether kobe took the policy in.
type AccessPolicyStatus struct {
	// ObservedGeneration is the metadata.generation kobe last read.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions with reasons (e.g. Accepted, with why a policy was refused).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}
