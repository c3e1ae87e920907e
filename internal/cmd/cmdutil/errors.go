// Package cmdutil holds what the API commands share: error reporting with hints, exit codes,
// waiting for a lease, time formatting and small flag helpers.
package cmdutil

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"

	"github.com/kunobi-ninja/kobe/api"
)

// ExitError ends kobe with Code. Err, when set, is reported like any error; when nil the exit
// is silent (e.g. `kobe run` passing on its command's exit status).
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

// Report prints err for a person ("kobe: …" and, when there is one, a hint line) and returns
// the process exit code: an ExitError's code, else 1.
func Report(w io.Writer, err error) int {
	code := 1
	var ee *ExitError
	if errors.As(err, &ee) {
		code = ee.Code
		if ee.Err == nil {
			return code
		}
	}
	fmt.Fprintf(w, "kobe: %v\n", err)
	if h := Hint(err); h != "" {
		fmt.Fprintf(w, "hint: %s\n", h)
	}
	return code
}

// Hint says what to do about an error, from its reason code; "" when there is nothing useful
// to add.
func Hint(err error) string {
	if err == nil {
		return ""
	}
	var ended *LeaseEndedError
	if errors.As(err, &ended) {
		return reasonHint(ended.Lease.Reason, "", 0)
	}
	var apiErr *api.Error
	if errors.As(err, &apiErr) {
		if apiErr.StatusCode == 401 && apiErr.Body.Reason == "" {
			return reasonHint(api.ReasonUnauthorized, "", 0)
		}
		return reasonHint(apiErr.Body.Reason, apiErr.Body.Detail, apiErr.RetryAfter.Seconds())
	}
	// Only for the API client's own "cannot reach" errors: kobe server/worker dialling Temporal
	// or a store must not be told to start kobe dev.
	if errors.Is(err, syscall.ECONNREFUSED) && strings.Contains(err.Error(), "cannot reach the kobe API") {
		return "is kobe running there? Start one with `kobe dev`, or point --server, KOBE_SERVER or a context (`kobe context list`) at it"
	}
	return ""
}

func reasonHint(reason api.ReasonCode, detail string, retryAfter float64) string {
	switch reason {
	case api.ReasonQuotaExhausted:
		h := "your role's quota is used up"
		if detail != "" {
			h += ": " + strings.TrimSuffix(detail, ".")
		}
		return h + " (release a lease with `kobe lease release ID` — `kobe lease list` shows yours — or ask an admin for more)"
	case api.ReasonUnauthorized:
		return "set --token / KOBE_TOKEN or run `kobe dev` (it writes a context); `kobe context list` shows what the CLI uses"
	case api.ReasonForbidden:
		return "your token's role does not allow this: ask an admin for a token with a role that does"
	case api.ReasonPoolExhausted:
		return "the pool had no free cluster before its queue timeout: try again later, or ask an admin to raise the pool's maxClusters (`kobe pool get POOL` shows it)"
	case api.ReasonRateLimited:
		if retryAfter > 0 {
			return fmt.Sprintf("too many requests: kobe retried and gave up; wait %.0fs and try again", retryAfter)
		}
		return "too many requests: wait a little and try again"
	case api.ReasonNotFound:
		return "check the name or id: `kobe lease list` and `kobe pool list` show what you can see"
	case api.ReasonExtensionBudgetExhausted:
		return "the lease used all the extensions its pool allows: create a new lease when this one ends"
	case api.ReasonMaxTTLCeiling:
		return "the lease cannot live past its pool's maxTtl from bind time: create a new lease when this one ends"
	case api.ReasonAliasTaken:
		return "an active lease already has this name: pick another --name, or release that lease"
	case api.ReasonIdempotencyConflict:
		return "this idempotency key was used for a different request: use a new --idempotency-key"
	case api.ReasonNotReady:
		return "the lease is not Bound yet: wait for it (`kobe lease get ID --wait`)"
	case api.ReasonSleeping:
		return "the lease's cluster is asleep: wake it with `kobe lease wake ID`, then try again"
	case api.ReasonExpired:
		return "the lease has ended: create a new one"
	case api.ReasonOrphaned:
		return "the kobe API stopped between admitting the lease and starting it, and the lease was given up (its quota and name are free again): create a new one"
	}
	return ""
}
