package local

// SetTrial adds arguments and environment, by component (ComponentAPIServer, "kine", …), to the
// processes of every instance started until restore is called: the idle benchmarks measure one
// setting at a time with it, against the defaults.
func SetTrial(args, env map[string][]string) (restore func()) {
	trialArgs, trialEnv = args, env
	return func() { trialArgs, trialEnv = nil, nil }
}
