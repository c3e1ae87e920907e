package doctor

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/kunobi-ninja/kobe/internal/store"
	"go.temporal.io/sdk/activity"
)

// Activities are the diagnostic activities.
type Activities struct {
	Store store.Store
	// Host is the machine's name, reported by each probe.
	Host string
}

// ProbeInput names the probe row the activity writes; the API reads it back afterwards
// to prove that the API and the worker share one store.
type ProbeInput struct {
	ProbeID string `json:"probeId"`
}

// ProbeResult reports where the activity ran and what the store cost.
type ProbeResult struct {
	WorkerHost  string        `json:"workerHost"`
	WorkerPID   int           `json:"workerPid"`
	StoreDriver string        `json:"storeDriver"`
	StoreWrite  time.Duration `json:"storeWrite"`
	StoreRead   time.Duration `json:"storeRead"`
	Attempt     int32         `json:"attempt"`
}

// DoctorProbe writes a probe row to the store and reads it back.
func (a *Activities) DoctorProbe(ctx context.Context, in ProbeInput) (ProbeResult, error) {
	if in.ProbeID == "" {
		return ProbeResult{}, fmt.Errorf("doctor probe: empty probe id")
	}
	res := ProbeResult{
		WorkerHost:  a.Host,
		WorkerPID:   os.Getpid(),
		StoreDriver: a.Store.Driver(),
		Attempt:     activity.GetInfo(ctx).Attempt,
	}
	written := time.Now().UTC().Truncate(time.Microsecond)
	t0 := time.Now()
	if err := a.Store.WriteProbe(ctx, in.ProbeID, written); err != nil {
		return res, fmt.Errorf("store write: %w", err)
	}
	res.StoreWrite = time.Since(t0)
	t1 := time.Now()
	got, err := a.Store.ReadProbe(ctx, in.ProbeID)
	if err != nil {
		return res, fmt.Errorf("store read: %w", err)
	}
	res.StoreRead = time.Since(t1)
	if !got.Equal(written) {
		return res, fmt.Errorf("store read back %v, wrote %v", got, written)
	}
	return res, nil
}
