package poolspec

import "github.com/kunobi-ninja/kobe/internal/jsonduration"

// The workflow payloads of this package with durations write them as strings ("10m0s"), so that
// the Temporal Web UI shows them readably, and read the nanoseconds of older histories too.

func (v Policy) MarshalJSON() ([]byte, error) {
	type plain Policy
	return jsonduration.Marshal(plain(v))
}

func (v *Policy) UnmarshalJSON(b []byte) error {
	type plain Policy
	return jsonduration.Unmarshal(b, (*plain)(v))
}
