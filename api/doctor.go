package api

import "time"

// MaxDoctorHold bounds --hold so that a typo cannot park a workflow for a year.
const MaxDoctorHold = time.Hour

// DoctorRequest is the body of POST /v1/doctor.
type DoctorRequest struct {
	// Hold is a Go duration ("30s"): how long the workflow waits in a durable timer.
	Hold string `json:"hold,omitempty"`
}

// DoctorStarted is the 202 answer of POST /v1/doctor.
type DoctorStarted struct {
	ID string `json:"id"`
	// StartMs is how long the API took to start the workflow on Temporal (API → Temporal hop).
	StartMs float64 `json:"startMs"`
	Status  string  `json:"status"`
}

// DoctorReport is the answer of GET /v1/doctor/{id}.
type DoctorReport struct {
	ID        string    `json:"id"`
	Status    string    `json:"status"` // Running, Completed, Failed
	Stage     string    `json:"stage,omitempty"`
	HoldUntil time.Time `json:"holdUntil,omitempty"`
	Error     string    `json:"error,omitempty"`
	Hops      []Hop     `json:"hops,omitempty"`
	// TotalMs is the workflow's own start-to-finish time.
	TotalMs float64 `json:"totalMs,omitempty"`
}

// Hop is one link of the chain a doctor run crosses.
type Hop struct {
	Name      string  `json:"name"`
	OK        bool    `json:"ok"`
	LatencyMs float64 `json:"latencyMs"`
	Detail    string  `json:"detail,omitempty"`
}
