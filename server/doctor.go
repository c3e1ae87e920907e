package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/kunobi-ninja/kobe/doctor"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/internal/store"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
)

func (s *Server) handleDoctorStart(w http.ResponseWriter, r *http.Request) {
	var req api.DoctorRequest
	if r.ContentLength != 0 {
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			writeError(w, http.StatusBadRequest, api.ReasonInvalidRequest, "Invalid request body", err.Error())
			return
		}
	}
	var hold time.Duration
	if req.Hold != "" {
		d, err := time.ParseDuration(req.Hold)
		if err != nil || d < 0 || d > api.MaxDoctorHold {
			writeError(w, http.StatusBadRequest, api.ReasonInvalidRequest, "Invalid hold",
				fmt.Sprintf("hold %q: want a duration between 0s and %s", req.Hold, api.MaxDoctorHold))
			return
		}
		hold = d
	}
	id := newID("doctor-")
	t0 := time.Now()
	_, err := s.Temporal.ExecuteWorkflow(r.Context(), client.StartWorkflowOptions{
		ID:        id,
		TaskQueue: s.TaskQueue,
		// The worker usually lives in this process in dev mode: eager start skips a poll round trip.
		EnableEagerStart:         true,
		WorkflowExecutionTimeout: hold + 10*time.Minute,
	}, doctor.WorkflowName, doctor.Input{ProbeID: id, Hold: hold})
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, api.ReasonBackendError, "Could not start the doctor workflow", err.Error())
		return
	}
	started := api.DoctorStarted{ID: id, StartMs: ms(time.Since(t0)), Status: "Running"}
	if req.TemporalSettings {
		// While the workflow runs, read the Temporal settings the bind depends on
		// (docs/deploy.md, "Temporal"): a warning here explains a slow bind that no hop's
		// latency shows.
		sctx, cancel := context.WithTimeout(r.Context(), 20*time.Second)
		started.Temporal = ReadTemporalSettings(sctx, s.Temporal, s.Namespace, s.TaskQueue, id)
		cancel()
	}
	writeJSON(w, http.StatusAccepted, started)
}

func (s *Server) handleDoctorGet(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !strings.HasPrefix(id, "doctor-") || len(id) > 64 {
		writeError(w, http.StatusNotFound, api.ReasonNotFound, "Doctor run not found", "")
		return
	}
	var wait time.Duration
	if v := r.URL.Query().Get("wait"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || d > time.Minute {
			writeError(w, http.StatusBadRequest, api.ReasonInvalidRequest, "Invalid wait", "wait must be a duration between 0s and 1m")
			return
		}
		wait = d
	}
	desc, err := s.Temporal.DescribeWorkflowExecution(r.Context(), id, "")
	if err != nil {
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			writeError(w, http.StatusNotFound, api.ReasonNotFound, "Doctor run not found", "")
			return
		}
		writeError(w, http.StatusServiceUnavailable, api.ReasonBackendError, "Temporal unavailable", err.Error())
		return
	}
	report := api.DoctorReport{ID: id}
	status := desc.GetWorkflowExecutionInfo().GetStatus()
	if status == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING && wait > 0 {
		ctx, cancel := context.WithTimeout(r.Context(), wait)
		err := s.Temporal.GetWorkflow(ctx, id, "").Get(ctx, nil)
		cancel()
		if err == nil || !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			status = enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED // re-read below for the real outcome
		}
	}
	if status == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		report.Status = "Running"
		if v, err := s.Temporal.QueryWorkflow(r.Context(), id, "", doctor.ProgressQuery); err == nil {
			var p doctor.Progress
			if v.Get(&p) == nil {
				report.Stage, report.HoldUntil = p.Stage, p.HoldUntil
			}
		}
		writeJSON(w, http.StatusOK, report)
		return
	}

	var res doctor.Result
	if err := s.Temporal.GetWorkflow(r.Context(), id, "").Get(r.Context(), &res); err != nil {
		report.Status = "Failed"
		report.Error = err.Error()
		writeJSON(w, http.StatusOK, report)
		return
	}
	report.Status = "Completed"
	report.TotalMs = ms(res.FinishedAt.Sub(res.StartedAt))
	report.Hops = append(report.Hops,
		api.Hop{Name: "workflow → worker activity", OK: true, LatencyMs: ms(res.ActivityRoundTrip),
			Detail: fmt.Sprintf("worker %s pid %d, attempt %d", res.Probe.WorkerHost, res.Probe.WorkerPID, res.Probe.Attempt)},
		api.Hop{Name: "worker → store write", OK: true, LatencyMs: ms(res.Probe.StoreWrite), Detail: res.Probe.StoreDriver},
		api.Hop{Name: "worker → store read", OK: true, LatencyMs: ms(res.Probe.StoreRead), Detail: res.Probe.StoreDriver},
	)
	if res.AfterHold != nil {
		report.Hops = append(report.Hops,
			api.Hop{Name: "durable timer", OK: true, LatencyMs: ms(res.Held), Detail: "survives restarts of every process"},
			api.Hop{Name: "worker → store after hold", OK: true, LatencyMs: ms(res.AfterHold.StoreWrite + res.AfterHold.StoreRead),
				Detail: afterHoldDetail(res.Probe, *res.AfterHold)},
		)
	}
	report.Hops = append(report.Hops, s.readWorkerProbe(r.Context(), id))
	writeJSON(w, http.StatusOK, report)
}

// readWorkerProbe reads the row the worker wrote: proof that the API and the worker share one store.
// The row is removed once read; a second GET checks the store is writable instead.
func (s *Server) readWorkerProbe(ctx context.Context, id string) api.Hop {
	hop := api.Hop{Name: "api → store read of the worker's probe", Detail: s.Store.Driver()}
	t0 := time.Now()
	_, err := s.Store.ReadProbe(ctx, id)
	hop.LatencyMs = ms(time.Since(t0))
	switch {
	case err == nil:
		hop.OK = true
		_ = s.Store.DeleteProbe(ctx, id)
	case errors.Is(err, store.ErrNotFound):
		hop.Name = "api → store (probe already collected; checked writable)"
		t0 = time.Now()
		err = store.CheckWritable(ctx, s.Store, "doctor-recheck-"+s.InstanceName)
		hop.LatencyMs = ms(time.Since(t0))
		hop.OK = err == nil
		if err != nil {
			hop.Detail = err.Error()
		}
	default:
		hop.Detail = err.Error()
	}
	return hop
}

func afterHoldDetail(before, after doctor.ProbeResult) string {
	d := fmt.Sprintf("worker %s pid %d", after.WorkerHost, after.WorkerPID)
	if before.WorkerHost != after.WorkerHost || before.WorkerPID != after.WorkerPID {
		d += " (another worker process than before the hold)"
	}
	return d
}
