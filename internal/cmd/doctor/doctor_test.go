package doctor

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kunobi-ninja/kobe/internal/cmd/cmdtest"
	"github.com/kunobi-ninja/kobe/internal/cmd/factory"
	"github.com/kunobi-ninja/kobe/internal/cmd/iostreams"
)

func TestFlags(t *testing.T) {
	ios, _, _, _ := iostreams.Test()
	f := &factory.Factory{IOStreams: ios}
	var got *Options
	require.NoError(t, cmdtest.Run(NewCmdDoctor(f, func(o *Options) error { got = o; return nil }), "--hold", "30s", "-o", "yaml"))
	assert.Equal(t, "yaml", got.Output.String())
	assert.Equal(t, 30*time.Second, got.Hold)
	assert.Equal(t, 2*time.Minute+30*time.Second, got.Timeout)

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-o", "xml"}, `-o "xml": must be table, json or yaml`},
		{[]string{"--hold", "-1s"}, "--hold"},
		{[]string{"--id", "doctor-1", "--hold", "1s"}, "cannot be used together"},
	} {
		ran := false
		err := cmdtest.Run(NewCmdDoctor(f, func(*Options) error { ran = true; return nil }), tc.args...)
		require.Error(t, err, tc.args)
		assert.Contains(t, err.Error(), tc.want)
		assert.False(t, ran)
	}
}
