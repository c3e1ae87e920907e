package api

import "time"

// MaxDoctorHold bounds --hold so that a typo cannot park a workflow for a year.
const MaxDoctorHold = time.Hour

// DoctorRequest is the body of POST /v1/doctor.
type DoctorRequest struct {
	// Hold is a Go duration ("30s"): how long the workflow waits in a durable timer.
	Hold string `json:"hold,omitempty"`
	// TemporalSettings asks for the Temporal settings kobe's bind depends on in the answer
	// (DoctorStarted.Temporal). Reading them probes Temporal for about two seconds: a start
	// without them measures the chain alone.
	TemporalSettings bool `json:"temporalSettings,omitempty"`
}

// DoctorStarted is the 202 answer of POST /v1/doctor.
type DoctorStarted struct {
	ID string `json:"id"`
	// StartMs is how long the API took to start the workflow on Temporal (API → Temporal hop).
	StartMs float64 `json:"startMs"`
	Status  string  `json:"status"`
	// Temporal lists the Temporal settings kobe relies on, as read from the service, when the
	// request asked for them.
	Temporal []TemporalSetting `json:"temporal,omitempty"`
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

// TemporalSetting is one setting of the Temporal service that kobe's bind depends on, as the
// API read it (or probed it) when a doctor run started. Name is the setting's dynamic-config
// key (docs/deploy.md, "Temporal"), or what it is when it is not one (search attributes).
type TemporalSetting struct {
	Name string `json:"name"`
	// OK is false when the value will slow or break the bind; Detail then says how.
	OK     bool   `json:"ok"`
	Value  string `json:"value"`
	Detail string `json:"detail,omitempty"`
}
