package local

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/backends/leasecred"
)

// What a lease does with its kubeconfig is observed in the API server's audit log: a policy
// that records only the requests of lease identities (the group of per-lease certificates and
// the holder of a warm-bound lease, see leasecred.Prepare), at
// Metadata level (no bodies) and only once a response started, so that kobe's own requests
// (health checks, the admin credential of the controllers and of kobe) cost nothing and never
// count. The log is capped (one file of leaseAuditMaxMB and one backup).
const (
	leaseAuditPolicyFile = "lease-audit-policy.yaml"
	leaseAuditLogFile    = "lease-audit.log"
	leaseAuditMaxMB      = 1
)

var leaseAuditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  userGroups: ["` + LeaseGroup + `"]
- level: Metadata
  users: ["` + leasecred.HolderUser + `"]
- level: None
`

// auditArgs are the API server's flags for the lease audit log; they write its policy first.
func (in *instance) auditArgs() ([]string, error) {
	policy := in.path(leaseAuditPolicyFile)
	if err := os.WriteFile(policy, []byte(leaseAuditPolicy), 0o600); err != nil {
		return nil, fmt.Errorf("writing the lease audit policy: %w", err)
	}
	return []string{
		"--audit-policy-file=" + policy,
		"--audit-log-path=" + in.path("logs", leaseAuditLogFile),
		"--audit-log-format=json",
		fmt.Sprintf("--audit-log-maxsize=%d", leaseAuditMaxMB),
		"--audit-log-maxbackup=1",
	}, nil
}

// LastActivity implements backends.ActivityReporter: the time of the newest request of a lease
// identity in the instance's audit log (zero when there is none yet). An instance whose API
// server was started before the audit log existed cannot say.
func (b *Backend) LastActivity(ctx context.Context, id string) (time.Time, error) {
	in, ok := b.get(id)
	if !ok {
		return time.Time{}, fmt.Errorf("instance %s: %w", id, backends.ErrNotFound)
	}
	if _, err := os.Stat(in.path(leaseAuditPolicyFile)); err != nil {
		return time.Time{}, fmt.Errorf("instance %s was started without the lease audit log: %w", id, backends.ErrUnavailableHere)
	}
	f, err := os.Open(in.path("logs", leaseAuditLogFile))
	if errors.Is(err, os.ErrNotExist) {
		return time.Time{}, nil // the API server has not started yet with the log (it creates it at its start, empty)
	}
	if err != nil {
		return time.Time{}, err
	}
	defer f.Close()
	return lastLeaseRequest(f)
}

// auditTail is how much of the end of the audit log lastLeaseRequest reads: a few events (one
// is about 1 KiB), so a check costs the same however long the log is.
const auditTail = 16 << 10

// auditEvent is the part of an audit event (audit.k8s.io/v1 Event) lastLeaseRequest reads.
type auditEvent struct {
	StageTimestamp time.Time `json:"stageTimestamp"`
	User           struct {
		Username string `json:"username"`
	} `json:"user"`
}

// lastLeaseRequest is the stage time of the last complete event of a lease identity in the
// audit log f (zero when there is none): it reads only the log's tail.
func lastLeaseRequest(f io.ReadSeeker) (time.Time, error) {
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return time.Time{}, err
	}
	from := max(size-auditTail, 0)
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return time.Time{}, err
	}
	tail, err := io.ReadAll(f)
	if err != nil {
		return time.Time{}, err
	}
	// Only whole lines: the last may be half-written, the first cut by the tail's start.
	if i := bytes.LastIndexByte(tail, '\n'); i >= 0 {
		tail = tail[:i]
	} else {
		return time.Time{}, nil
	}
	lines := bytes.Split(tail, []byte{'\n'})
	if from > 0 {
		lines = lines[1:]
	}
	for i := len(lines) - 1; i >= 0; i-- {
		var ev auditEvent
		if json.Unmarshal(lines[i], &ev) != nil {
			continue
		}
		lease := strings.HasPrefix(ev.User.Username, LeaseUserPrefix) || ev.User.Username == leasecred.HolderUser
		if lease && !ev.StageTimestamp.IsZero() {
			return ev.StageTimestamp, nil
		}
	}
	return time.Time{}, nil
}
