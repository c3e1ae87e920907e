package leasestart

import "github.com/kunobi-ninja/kobe/internal/jsonduration"

// The payloads with durations write them as strings ("10m0s"), so that the Temporal Web UI
// shows them readably, and read the nanoseconds of older histories too.

func (v Input) MarshalJSON() ([]byte, error) {
	type plain Input
	return jsonduration.Marshal(plain(v))
}

func (v *Input) UnmarshalJSON(b []byte) error {
	type plain Input
	return jsonduration.Unmarshal(b, (*plain)(v))
}

func (v Resume) MarshalJSON() ([]byte, error) {
	type plain Resume
	return jsonduration.Marshal(plain(v))
}

func (v *Resume) UnmarshalJSON(b []byte) error {
	type plain Resume
	return jsonduration.Unmarshal(b, (*plain)(v))
}

func (v View) MarshalJSON() ([]byte, error) {
	type plain View
	return jsonduration.Marshal(plain(v))
}

func (v *View) UnmarshalJSON(b []byte) error {
	type plain View
	return jsonduration.Unmarshal(b, (*plain)(v))
}
