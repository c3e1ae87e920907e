package vcluster

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/backends"
)

// Sync error reason codes: why the syncer could not carry a virtual object over to the host.
// Stable: tools may match on them (defined once, in api).
const (
	SyncDenied          = api.ReasonSyncDenied          // the host's admission refused it (PodSecurity, a webhook, RBAC)
	SyncConflict        = api.ReasonSyncConflict        // the host object exists and is not the syncer's, or changed under it
	HostQuotaExceeded   = api.ReasonHostQuotaExceeded   // a ResourceQuota of the host namespace
	UnsupportedResource = api.ReasonUnsupportedResource // the host does not serve the kind or field
	SyncFailed          = api.ReasonSyncFailed          // anything else the syncer reports
)

// SyncError is one object the syncer could not sync, as it reported it: a Warning event with
// reason SyncError on the virtual object.
type SyncError = backends.SyncError

// classifySyncError maps the syncer's message (the host API's error, wrapped) to a reason code.
func classifySyncError(msg string) api.ReasonCode {
	m := strings.ToLower(msg)
	switch {
	case strings.Contains(m, "exceeded quota"), strings.Contains(m, "must specify limits"), strings.Contains(m, "must specify requests"):
		return HostQuotaExceeded
	case strings.Contains(m, "already exists"), strings.Contains(m, "the object has been modified"), strings.Contains(m, "conflict"):
		return SyncConflict
	case strings.Contains(m, "no matches for kind"), strings.Contains(m, "could not find the requested resource"),
		strings.Contains(m, "unknown field"), strings.Contains(m, "not supported"):
		return UnsupportedResource
	case strings.Contains(m, "forbidden"), strings.Contains(m, "denied"), strings.Contains(m, "not allowed"), strings.Contains(m, "violates podsecurity"):
		return SyncDenied
	}
	return SyncFailed
}

// SyncErrors lists what the syncer could not sync, newest first, read from the virtual
// cluster's events (reason SyncError) through the admin credential (backends.SyncErrorReporter).
func (b *Backend) SyncErrors(ctx context.Context, id string) ([]SyncError, error) {
	admin, err := b.adminKubeconfig(ctx, id)
	if err != nil {
		return nil, err
	}
	virtual, err := virtualClient(admin.kubeconfig)
	if err != nil {
		return nil, err
	}
	events, err := virtual.CoreV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "reason=SyncError"})
	if err != nil {
		return nil, fmt.Errorf("instance %s: events: %w", id, err)
	}
	return syncErrorsOf(events.Items), nil
}

func syncErrorsOf(events []corev1.Event) []SyncError {
	var out []SyncError
	for _, e := range events {
		if e.Reason != "SyncError" {
			continue
		}
		last := e.LastTimestamp.Time
		if last.IsZero() {
			last = e.EventTime.Time
		}
		count := e.Count
		if count == 0 {
			count = 1
		}
		obj := e.InvolvedObject.Kind + " " + e.InvolvedObject.Name
		if e.InvolvedObject.Namespace != "" {
			obj = e.InvolvedObject.Kind + " " + e.InvolvedObject.Namespace + "/" + e.InvolvedObject.Name
		}
		out = append(out, SyncError{Reason: classifySyncError(e.Message), Object: obj, Message: oneLine(e.Message), Count: count, Last: last})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Last.After(out[j].Last) })
	return out
}
