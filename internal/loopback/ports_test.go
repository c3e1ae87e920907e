package loopback

import (
	"net"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestListenRange(t *testing.T) {
	lo, hi, ok := listenRange(32768, 60999) // Linux's default
	assert.True(t, ok)
	assert.Equal(t, [2]int{61000, 65535}, [2]int{lo, hi}, "above the ephemeral range")
	lo, hi, ok = listenRange(32768, 65000)
	assert.True(t, ok)
	assert.Equal(t, [2]int{20000, 32767}, [2]int{lo, hi}, "no room above: below it")
	_, _, ok = listenRange(1024, 65000)
	assert.False(t, ok, "no room on either side: the kernel picks")
}

// allocatorOver is an allocator over [lo, hi] whose cursor starts at lo.
func allocatorOver(t *testing.T, lo, hi int) *Allocator {
	a := &Allocator{lo: lo, hi: hi, next: lo, given: map[int]bool{}}
	a.ephemeral = func() (int, int, error) { t.Fatal("the range is set"); return 0, 0, nil }
	return a
}

// freeSpan finds n consecutive loopback ports in the listeners' range that nothing listens on.
func freeSpan(t *testing.T, n int) int {
	for p := 64000; p < 65500; p += n {
		ok := true
		for q := p; q < p+n; q++ {
			ok = ok && Listenable(q)
		}
		if ok {
			return p
		}
	}
	t.Skip("no free span of loopback ports in 64000-65500 on this host")
	return 0
}

func TestPortAllocatorSkipsReservedAndListenedPortsAndGivesEachOnce(t *testing.T) {
	p := freeSpan(t, 6)
	a := allocatorOver(t, p, p+5)
	held, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+1)) // another process's listener
	require.NoError(t, err)
	defer held.Close()
	reserved := func(q int) bool { return q == p+2 } // an instance asleep owns it

	got, err := a.Take(2, reserved)
	require.NoError(t, err)
	assert.Equal(t, []int{p, p + 3}, got, "skips the port listened on and the reserved one")
	got, err = a.Take(2, reserved)
	require.NoError(t, err)
	assert.Equal(t, []int{p + 4, p + 5}, got, "never the same port twice")

	// Every port handed out once: it starts over, still skipping the taken ones.
	got, err = a.Take(2, reserved)
	require.NoError(t, err)
	assert.Equal(t, []int{p, p + 3}, got)
}

func TestPortAllocatorFailsWhenNothingIsFree(t *testing.T) {
	p := freeSpan(t, 2)
	a := allocatorOver(t, p, p+1)
	_, err := a.Take(1, func(int) bool { return true })
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no free loopback port")
}

func TestPortAllocatorFallsBackToTheKernelWithoutRoom(t *testing.T) {
	a := &Allocator{ephemeral: func() (int, int, error) { return 1024, 65000, nil }}
	got, err := a.Take(2, func(int) bool { return false })
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.NotEqual(t, got[0], got[1])
}

func TestPortAllocatorNeverGivesOnePortTwiceInOneCall(t *testing.T) {
	p := freeSpan(t, 3)
	a := allocatorOver(t, p, p+2)
	_, err := a.Take(2, func(int) bool { return false })
	require.NoError(t, err)
	_, err = a.Take(4, func(int) bool { return false })
	require.Error(t, err, "3 ports cannot make 4 distinct ones, even starting over")
}
