package lease

import "github.com/kunobi-ninja/kobe/internal/jsonduration"

// The workflow payloads of this package with durations write them as strings ("10m0s"), so that
// the Temporal Web UI shows them readably, and read the nanoseconds of older histories too.

func (v LeaseInput) MarshalJSON() ([]byte, error) {
	type plain LeaseInput
	return jsonduration.Marshal(plain(v))
}

func (v *LeaseInput) UnmarshalJSON(b []byte) error {
	type plain LeaseInput
	return jsonduration.Unmarshal(b, (*plain)(v))
}

func (v LeaseResume) MarshalJSON() ([]byte, error) {
	type plain LeaseResume
	return jsonduration.Marshal(plain(v))
}

func (v *LeaseResume) UnmarshalJSON(b []byte) error {
	type plain LeaseResume
	return jsonduration.Unmarshal(b, (*plain)(v))
}

func (v LeaseView) MarshalJSON() ([]byte, error) {
	type plain LeaseView
	return jsonduration.Marshal(plain(v))
}

func (v *LeaseView) UnmarshalJSON(b []byte) error {
	type plain LeaseView
	return jsonduration.Unmarshal(b, (*plain)(v))
}

func (v ExtendRequest) MarshalJSON() ([]byte, error) {
	type plain ExtendRequest
	return jsonduration.Marshal(plain(v))
}

func (v *ExtendRequest) UnmarshalJSON(b []byte) error {
	type plain ExtendRequest
	return jsonduration.Unmarshal(b, (*plain)(v))
}

func (v LeaseRecord) MarshalJSON() ([]byte, error) {
	type plain LeaseRecord
	return jsonduration.Marshal(plain(v))
}

func (v *LeaseRecord) UnmarshalJSON(b []byte) error {
	type plain LeaseRecord
	return jsonduration.Unmarshal(b, (*plain)(v))
}
