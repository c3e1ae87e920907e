package v1alpha1

// The durations of kobe's resources are strings, as in a pool manifest ("5m", "2h"): a
// metav1.Duration would be written back as "5m0s", so that the resource would no longer read
// as the manifest it was applied from. Their form is checked by the API server (the rules
// below), their meaning (a range, a field's default) by kobe and, where it can be said in CEL,
// by rules on the fields that use them.
//
// DurationPattern is the form of a Go duration (time.ParseDuration) without a sign: digits
// with an optional fraction, each with a unit. It is written out in the markers below and in
// the rules that compare durations (a marker cannot name a constant); a test checks that every
// copy of it in the generated CRDs is this one and that it accepts what time.ParseDuration
// accepts.
const DurationPattern = `^(0|(([0-9]+([.][0-9]*)?|[.][0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$`

// DaysPattern is DurationPattern or a whole number of days ("30d"), the form
// poolspec.ParseDays reads: certificates are spoken of in days.
const DaysPattern = `^([0-9]+d|0|(([0-9]+([.][0-9]*)?|[.][0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$`

// Duration is a Go duration string such as 30s, 5m or 2h.
//
// +kubebuilder:validation:MaxLength=64
// +kubebuilder:validation:XValidation:rule="self.matches('^(0|(([0-9]+([.][0-9]*)?|[.][0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$')",message="must be a duration such as 30s, 5m or 2h"
type Duration string

// DaysDuration is a Go duration string, or a whole number of days such as 30d.
//
// +kubebuilder:validation:MaxLength=64
// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+d|0|(([0-9]+([.][0-9]*)?|[.][0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$')",message="must be a duration such as 30d, 12h or 5m"
type DaysDuration string
