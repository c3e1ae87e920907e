package lease

import "github.com/kunobi-ninja/kobe/internal/jsonduration"

// The workflow payloads of this package with durations write them as strings ("10m0s"), so that
// the Temporal Web UI shows them readably, and read the nanoseconds of older histories too.

func (v ExtendRequest) MarshalJSON() ([]byte, error) {
	type plain ExtendRequest
	return jsonduration.Marshal(plain(v))
}

func (v *ExtendRequest) UnmarshalJSON(b []byte) error {
	type plain ExtendRequest
	return jsonduration.Unmarshal(b, (*plain)(v))
}

func (v WakeRequest) MarshalJSON() ([]byte, error) {
	type plain WakeRequest
	return jsonduration.Marshal(plain(v))
}

func (v *WakeRequest) UnmarshalJSON(b []byte) error {
	type plain WakeRequest
	return jsonduration.Unmarshal(b, (*plain)(v))
}

func (v ReapInput) MarshalJSON() ([]byte, error) {
	type plain ReapInput
	return jsonduration.Marshal(plain(v))
}

func (v *ReapInput) UnmarshalJSON(b []byte) error {
	type plain ReapInput
	return jsonduration.Unmarshal(b, (*plain)(v))
}
