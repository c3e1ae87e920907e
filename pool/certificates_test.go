package pool

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/instance"
)

// What the pool does with its members' certificate expiry: a warm member expiring within
// recycleBefore is recycled; a leased one is re-issued in place when the backend can and its
// CA outlives recycleBefore, else its lease is told once; valid or unknown expiry changes nothing.
func TestCertificatesChecked(t *testing.T) {
	pol := testPolicy()
	pol.RecycleBefore = 2 * time.Minute
	leased := func(id string) *Member {
		m := member(id, MemberLeased, time.Hour)
		m.LeaseID = "lease-" + id
		return m
	}
	s := stateWith(pol, member("warm-soon", MemberReady, time.Hour), member("warm-fine", MemberReady, time.Hour),
		member("warm-unknown", MemberReady, time.Hour), leased("leased-reissue"), leased("leased-ca"), leased("leased-cannot"))
	soon := backends.CertificateExpiry{CA: t0.Add(24 * time.Hour), Serving: t0.Add(time.Minute), Client: t0.Add(3 * time.Minute)}
	fine := backends.CertificateExpiry{CA: t0.Add(24 * time.Hour), Serving: t0.Add(time.Hour), Client: t0.Add(time.Hour)}
	caSoon := backends.CertificateExpiry{CA: t0.Add(time.Minute), Serving: t0.Add(time.Minute), Client: t0.Add(time.Minute)}
	states := []instance.CertificateState{
		{InstanceID: "warm-soon", Expiry: soon, CanReissue: true},
		{InstanceID: "warm-fine", Expiry: fine, CanReissue: true},
		{InstanceID: "warm-unknown", Message: "cannot say"},
		{InstanceID: "leased-reissue", Expiry: soon, CanReissue: true},
		{InstanceID: "leased-ca", Expiry: caSoon, CanReissue: true},
		{InstanceID: "leased-cannot", Expiry: soon},
		{InstanceID: "gone-meanwhile", Expiry: soon},
	}
	r := &recorder{now: t0}
	s.CertificatesChecked(states, r)
	assert.Equal(t, MemberDeleting, s.Members["warm-soon"].Phase)
	assert.Equal(t, RecycleCertExpiry, s.Members["warm-soon"].Reason)
	for _, id := range []string{"warm-fine", "warm-unknown"} {
		assert.Equal(t, MemberReady, s.Members[id].Phase, id)
	}
	log := strings.Join(r.log, "\n")
	assert.Contains(t, log, "instance.certificates_expiring")
	reissues, warnings := 0, 0
	for _, l := range r.log {
		if strings.Contains(l, "pool.ReissueCertificates") {
			reissues++
			assert.Contains(t, l, "leased-reissue")
		}
		if strings.Contains(l, SignalInstanceCertificates) {
			warnings++
		}
	}
	assert.Equal(t, 1, reissues, "only the member whose backend can, and whose CA outlives recycleBefore, is re-issued:\n%s", log)
	assert.Equal(t, 2, warnings, "the CA expiring and the backend that cannot: their leases are told:\n%s", log)
	assert.True(t, s.Members["leased-ca"].CertificatesWarned && s.Members["leased-cannot"].CertificatesWarned)
	for _, id := range []string{"leased-reissue", "leased-ca", "leased-cannot"} {
		assert.Equal(t, MemberLeased, s.Members[id].Phase, "a leased member is never taken from its holder: %s", id)
	}

	// A second check warns nobody twice.
	r2 := &recorder{now: t0}
	s.CertificatesChecked(states[3:6], r2)
	for _, l := range r2.log {
		assert.NotContains(t, l, SignalInstanceCertificates)
	}
}

// A check is started only when asked for, one per host queue, for Ready and Leased members.
func TestCertificateChecksDue(t *testing.T) {
	other := member("b", MemberLeased, time.Hour)
	other.Placement.TaskQueue = "q2"
	s := stateWith(testPolicy(), member("a", MemberReady, time.Hour), other, member("c", MemberCreating, time.Minute))
	assert.Empty(t, s.CertificateChecksDue(nil), "not asked for")
	s.CertificateCheckRequested()
	due := s.CertificateChecksDue(map[string]bool{"q2": true})
	require.Len(t, due, 1, "q2's check is in flight")
	assert.Equal(t, []string{"a"}, due[0].Request.InstanceIDs)
	assert.Equal(t, "p", due[0].Request.Pool)
	assert.Empty(t, s.CertificateChecksDue(nil), "one request, one round")
	assert.Equal(t, 30*24*time.Hour, stateWith(testPolicy()).recycleBefore(), "the default for policies without it")
}
