package instance

import "github.com/kunobi-ninja/kobe/internal/jsonduration"

// The workflow payloads of this package with durations write them as strings ("10m0s"), so that
// the Temporal Web UI shows them readably, and read the nanoseconds of older histories too.

func (v ProvisionInput) MarshalJSON() ([]byte, error) {
	type plain ProvisionInput
	return jsonduration.Marshal(plain(v))
}

func (v *ProvisionInput) UnmarshalJSON(b []byte) error {
	type plain ProvisionInput
	return jsonduration.Unmarshal(b, (*plain)(v))
}

func (v SleepInput) MarshalJSON() ([]byte, error) {
	type plain SleepInput
	return jsonduration.Marshal(plain(v))
}

func (v *SleepInput) UnmarshalJSON(b []byte) error {
	type plain SleepInput
	return jsonduration.Unmarshal(b, (*plain)(v))
}

func (v WakeResult) MarshalJSON() ([]byte, error) {
	type plain WakeResult
	return jsonduration.Marshal(plain(v))
}

func (v *WakeResult) UnmarshalJSON(b []byte) error {
	type plain WakeResult
	return jsonduration.Unmarshal(b, (*plain)(v))
}
