package local

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func auditLine(user string, at time.Time) string {
	return fmt.Sprintf(`{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","stage":"ResponseComplete","verb":"get",`+
		`"user":{"username":%q,"groups":["kobe:leases"]},"stageTimestamp":%q}`, user, at.Format(time.RFC3339Nano)) + "\n"
}

func TestLastLeaseRequestReadsTheNewestCompleteLeaseEvent(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)
	log := auditLine("kobe:lease:lease-a", t0) + auditLine("kobe:lease:lease-a", t0.Add(time.Second)) +
		auditLine("kobe:admin", t0.Add(2*time.Second)) + // not a lease: never counts, whatever the policy
		`{"kind":"Event","user":{"username":"kobe:lease:lease-a"},"stageTimestamp":"2026-12-02T06:00:09Z"` // half-written
	got, err := lastLeaseRequest(strings.NewReader(log))
	require.NoError(t, err)
	assert.Equal(t, t0.Add(time.Second), got)

	got, err = lastLeaseRequest(strings.NewReader(""))
	require.NoError(t, err)
	assert.True(t, got.IsZero(), "an empty log: no request")
}

func TestLastLeaseRequestReadsOnlyTheTail(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)
	var log bytes.Buffer
	for i := range 200 { // longer than auditTail
		log.WriteString(auditLine("kobe:lease:lease-a", t0.Add(time.Duration(i)*time.Second)))
	}
	require.Greater(t, log.Len(), auditTail)
	got, err := lastLeaseRequest(bytes.NewReader(log.Bytes()))
	require.NoError(t, err)
	assert.Equal(t, t0.Add(199*time.Second), got)
}

// A warm-bound lease's requests are its holder's (leasecred.Prepare): they count too; another
// ServiceAccount's never do.
func TestLastLeaseRequestCountsTheHolder(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)
	log := auditLine("system:serviceaccount:kube-system:kobe-lease-holder", t0) +
		auditLine("system:serviceaccount:kube-system:generic-garbage-collector", t0.Add(time.Second))
	got, err := lastLeaseRequest(strings.NewReader(log))
	require.NoError(t, err)
	assert.Equal(t, t0, got)
}
