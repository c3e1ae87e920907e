package devserver

import (
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/kunobi-ninja/kobe/internal/loopback"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
)

// A port the server meant for one of its services that something else took in the meantime
// (the CI failure of stop 31: a parallel test's connection) is an error that names it. Before,
// the server's "Failed to start gRPC listener" went to a logger that does not exit (the tests'
// no-op one) and the server went on with no listener: a nil-pointer panic took the whole test
// binary down (and with a real logger, kobe exited with no error returned to its caller).
func TestAServicePortTakenMeanwhileIsAnError(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer held.Close()
	taken := held.Addr().(*net.TCPAddr).Port
	pick := servicePorts
	var others []int
	servicePorts = func(ip string, n int) ([]int, error) {
		ps, err := pick(ip, n)
		if err != nil {
			return nil, err
		}
		ps[0] = taken // the history service's
		others = ps[1:]
		return ps, nil
	}
	defer func() { servicePorts = pick }()

	for _, logger := range []*zap.Logger{nil, zap.NewNop()} {
		ts, err := StartTemporal(TemporalOptions{Logger: logger})
		if err == nil {
			_ = ts.Stop()
		}
		require.Error(t, err)
		t.Log(err)
		assert.Contains(t, err.Error(), "Failed to start gRPC listener")
		assert.Contains(t, err.Error(), net.JoinHostPort("127.0.0.1", strconv.Itoa(taken)))
		assert.Contains(t, err.Error(), "address already in use")
		// Nothing of the half-started server holds on to its other ports.
		for i, p := range others {
			assert.Eventually(t, func() bool { return loopback.Listenable(p) }, 10*time.Second, 10*time.Millisecond,
				"port %d (%d of matching, worker, http) still held", p, i)
		}
	}
}

// The ports the server's services are given are outside the kernel's ephemeral range, where no
// outgoing connection (of this process or another) can take one between its choice and its
// bind. Before, they were the kernel's picks for `listen :0`, inside that range.
func TestServicePortsAreOutsideTheEphemeralRange(t *testing.T) {
	lo, hi, err := loopback.EphemeralRange()
	if err != nil {
		t.Skipf("the kernel's ephemeral port range is not readable here: %v", err)
	}
	ports, err := freePorts("127.0.0.1", 4)
	require.NoError(t, err)
	one, err := FreePort("127.0.0.1")
	require.NoError(t, err)
	seen := map[int]bool{}
	for _, p := range append(ports, one) {
		assert.False(t, p >= lo && p <= hi, "port %d is in the ephemeral range %d-%d", p, lo, hi)
		assert.False(t, seen[p], "port %d given twice", p)
		seen[p] = true
	}
}
