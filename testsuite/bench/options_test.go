package bench

import (
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeKobe is an executable file standing in for bin/kobe: flag validation only checks that
// the binary exists and can be run.
func fakeKobe(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "kobe")
	require.NoError(t, os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755))
	return p
}

func TestParseFlagsDefaults(t *testing.T) {
	kobe := fakeKobe(t)
	o, err := ParseFlags([]string{"-kobe", kobe}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, []int{1, 10, 50}, o.Clients)
	assert.Equal(t, "bench.json", o.Out)
	assert.Equal(t, 100, o.RoundsFor(1), "the 1-client level gets 100 samples")
	assert.Equal(t, 10, o.RoundsFor(10))
	assert.Equal(t, 2, o.RoundsFor(50))
	assert.Equal(t, 34, o.RoundsFor(3), "3 clients: 34 rounds for at least 100 binds")
	assert.Equal(t, 50, o.MaxClientsLevel())
	assert.False(t, o.FirstRequestAtOnce, "first requests wait for the round by default")
	assert.NotContains(t, o.CommandLine(), "-first-request-at-once")
}

func TestParseFlagsFirstRequestAtOnce(t *testing.T) {
	o, err := ParseFlags([]string{"-kobe", fakeKobe(t), "-first-request-at-once"}, io.Discard)
	require.NoError(t, err)
	assert.True(t, o.FirstRequestAtOnce)
	assert.Contains(t, o.CommandLine(), "-thawed-spares -1 -boot-cpu-shares -1 -first-request-at-once -k8s-version",
		"the report's flags line says how the figures were taken")
}

func TestParseFlagsDevelopmentRun(t *testing.T) {
	kobe := fakeKobe(t)
	o, err := ParseFlags([]string{"-kobe", kobe, "-clients", "1, 2", "-rounds", "1", "-lifecycles", "2",
		"-lifecycle-clients", "2", "-cold", "1", "-floor", "20", "-out", "x.json", "-timeout", "15m"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, []int{1, 2}, o.Clients)
	assert.Equal(t, 1, o.RoundsFor(1), "an explicit -rounds applies to every level")
	assert.Equal(t, 1, o.RoundsFor(2))
	assert.Equal(t, 2, o.Lifecycles)
	assert.Equal(t, 20, o.Floor)
	assert.Equal(t, "x.json", o.Out)
	assert.Equal(t, 15*time.Minute, o.Timeout)
}

func TestParseFlagsErrorsNameTheFlag(t *testing.T) {
	kobe := fakeKobe(t)
	notExec := filepath.Join(t.TempDir(), "kobe")
	require.NoError(t, os.WriteFile(notExec, nil, 0o644))
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"-clients", "0,x"}, `-clients: 0 is out of range 1..200`},
		{[]string{"-clients", "1,x"}, `-clients: "x" is not a number`},
		{[]string{"-clients", ""}, `-clients: empty`},
		{[]string{"-clients", "1,1"}, `-clients: 1 is listed twice`},
		{[]string{"-clients", "500"}, `-clients: 500 is out of range`},
		{[]string{"-rounds", "-1"}, `-rounds: -1 must be at least 0`},
		{[]string{"-lifecycles", "0"}, `-lifecycles: 0 must be at least 1`},
		{[]string{"-lifecycles", "2", "-lifecycle-clients", "4"}, `-lifecycle-clients: 4 clients for 2 lifecycles`},
		{[]string{"-cold", "0"}, `-cold: 0 must be at least 1`},
		{[]string{"-floor", "0"}, `-floor: 0 must be at least 1`},
		{[]string{"-max-provisions", "0"}, `-max-provisions: 0 must be at least 1`},
		{[]string{"-boot-cpu-shares", "1"}, `-boot-cpu-shares: 1 is not -1`},
		{[]string{"-boot-cpu-shares", "-2"}, `-boot-cpu-shares: -2 is not -1`},
		{[]string{"-boot-cpu-shares", "300000"}, `-boot-cpu-shares: 300000 is not -1`},
		{[]string{"-timeout", "10s"}, `-timeout: 10s is too short`},
		{[]string{"-out", " "}, `-out: a file name is required`},
		{[]string{"-floor", "many"}, `invalid value "many" for flag -floor`},
		{[]string{"extra"}, `unexpected argument "extra"`},
	}
	for _, tc := range cases {
		t.Run(tc.want, func(t *testing.T) {
			_, err := ParseFlags(append([]string{"-kobe", kobe}, tc.args...), io.Discard)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}

	_, err := ParseFlags([]string{"-kobe", filepath.Join(t.TempDir(), "missing")}, io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "-kobe:")
	assert.Contains(t, err.Error(), "make build")
	_, err = ParseFlags([]string{"-kobe", notExec}, io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "is not an executable file")
}
