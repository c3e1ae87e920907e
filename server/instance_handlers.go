package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/kunobi-ninja/kobe/instance"
	"github.com/kunobi-ninja/kobe/pool"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/internal/access"
	"github.com/kunobi-ninja/kobe/internal/store"
	"go.temporal.io/sdk/client"
)

// The instances API is for operators: a role with pool.admin lists and reads instances and
// retries a Quarantined one's teardown; forgetting one (dropping kobe's record of a cluster
// that may still exist) is for the admin role alone.

func instanceView(in store.Instance) api.Instance {
	v := api.Instance{ID: in.ID, Pool: in.Pool, Backend: in.Backend, Host: in.Host, Phase: in.Phase, Endpoint: in.Endpoint,
		CreatedAt: in.CreatedAt, UpdatedAt: in.UpdatedAt}
	var data struct {
		Message string `json:"message"`
	}
	if len(in.Data) > 0 && json.Unmarshal(in.Data, &data) == nil {
		v.Message = data.Message
	}
	return v
}

func (s *Server) handleInstanceList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	is, err := s.Store.ListInstances(r.Context(), store.InstanceFilter{Pool: q.Get("pool"), Phase: api.InstancePhase(q.Get("phase")), Host: q.Get("host")})
	if err != nil {
		s.unavailable(w, r, "listing instances", err)
		return
	}
	out := []api.Instance{}
	for _, in := range is {
		out = append(out, instanceView(in))
	}
	writeJSON(w, http.StatusOK, out)
}

// instance reads the instance of the request's path; false when it answered already.
func (s *Server) instance(w http.ResponseWriter, r *http.Request) (store.Instance, bool) {
	id := r.PathValue("id")
	in, err := s.Store.GetInstance(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		writeError(w, http.StatusNotFound, api.ReasonNotFound, "Instance not found", fmt.Sprintf("no instance %q", id))
		return in, false
	}
	if err != nil {
		s.unavailable(w, r, "reading the instance", err)
		return in, false
	}
	return in, true
}

func (s *Server) handleInstanceGet(w http.ResponseWriter, r *http.Request) {
	in, ok := s.instance(w, r)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, instanceView(in))
}

func notQuarantined(w http.ResponseWriter, in store.Instance, what string) {
	writeError(w, http.StatusConflict, api.ReasonNotQuarantined, "Instance not quarantined",
		fmt.Sprintf("instance %s is %s; only a Quarantined instance can be %s", in.ID, in.Phase, what))
}

// handleInstanceRetryTeardown asks the pool's workflow to try a Quarantined member's teardown
// again. When the pool's workflow is gone (the pool was deleted), nobody else will: the API
// starts a Teardown workflow for the instance itself, under a fresh id (a retry after a failed
// retry must run again), on the queue of the host that holds the instance.
func (s *Server) handleInstanceRetryTeardown(w http.ResponseWriter, r *http.Request) {
	in, ok := s.instance(w, r)
	if !ok {
		return
	}
	if in.Phase != api.InstanceQuarantined {
		notQuarantined(w, in, "retried")
		return
	}
	actor := principalOf(r).Name
	out := api.RetryTeardown{ID: in.ID, Via: "pool", WorkflowID: pool.WorkflowID(in.Pool)}
	err := s.Temporal.SignalWorkflow(r.Context(), out.WorkflowID, "", pool.SignalRetryTeardown,
		pool.MemberAction{InstanceID: in.ID, Actor: actor})
	if isNotRunning(err) {
		out.Via, out.WorkflowID = "teardown", newID("teardown-"+in.ID+"-")
		_, err = s.Temporal.ExecuteWorkflow(r.Context(), client.StartWorkflowOptions{ID: out.WorkflowID, TaskQueue: s.TaskQueue},
			instance.TeardownWorkflowName, instance.TeardownInput{
				Backend:   in.Backend,
				Spec:      backends.InstanceSpec{ID: in.ID, Pool: in.Pool},
				Placement: s.placement(in),
			})
	}
	if err != nil {
		s.unavailable(w, r, "retrying the teardown", err)
		return
	}
	s.audit(r, "instance.retry_teardown", in.ID, in.Pool, "accepted", map[string]any{"via": out.Via, "workflowId": out.WorkflowID})
	writeJSON(w, http.StatusAccepted, out)
}

// placement is where an instance's teardown activities run: the queue of its host for a
// host-bound backend (its processes and files live there), the shared queue otherwise.
func (s *Server) placement(in store.Instance) instance.HostAssignment {
	p := instance.HostAssignment{HostID: in.Host, TaskQueue: s.TaskQueue}
	if f, ok := backends.Lookup(in.Backend); ok && in.Host != "" {
		_, hostBound := f.Prototype.(backends.HostBound)
		if hostBound || strings.HasPrefix(in.Host, instance.HostClusterPrefix) {
			// A host-bound instance's host, or the named host cluster it lives in.
			p.TaskQueue = instance.HostQueue(s.TaskQueue, in.Host)
		}
	}
	return p
}

// handleInstanceForget drops kobe's record of an instance an operator cleaned up by hand: the
// pool (if its workflow runs) is told to drop the member, then the row goes. Only Quarantined
// instances, unless ?force=true (e.g. a row an older kobe left in Deleting).
func (s *Server) handleInstanceForget(w http.ResponseWriter, r *http.Request) {
	p := principalOf(r)
	if p.Role != access.RoleAdmin {
		writeError(w, http.StatusForbidden, api.ReasonForbidden, "Forbidden",
			fmt.Sprintf("only the %s role forgets instances (role %s may retry their teardown)", access.RoleAdmin, p.Role))
		return
	}
	in, ok := s.instance(w, r)
	if !ok {
		return
	}
	force := r.URL.Query().Get("force") == "true"
	if in.Phase != api.InstanceQuarantined && !force {
		notQuarantined(w, in, "forgotten (force=true forgets it anyway)")
		return
	}
	err := s.Temporal.SignalWorkflow(r.Context(), pool.WorkflowID(in.Pool), "", pool.SignalForgetMember,
		pool.MemberAction{InstanceID: in.ID, Actor: p.Name})
	if err != nil && !isNotRunning(err) {
		s.unavailable(w, r, "telling the pool", err)
		return
	}
	if err := s.Store.DeleteInstance(r.Context(), in.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
		s.unavailable(w, r, "forgetting the instance", err)
		return
	}
	s.audit(r, "instance.forget", in.ID, in.Pool, "ok", map[string]any{"phase": in.Phase, "host": in.Host, "backend": in.Backend, "force": force})
	w.WriteHeader(http.StatusNoContent)
}
