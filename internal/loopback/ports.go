// Package loopback hands out loopback TCP ports for listeners a process starts itself or has
// another process start a moment later (an instance's kine and API server, the embedded
// Temporal server's services).
package loopback

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// Why ports are not the kernel's pick: a port is chosen, then bound a moment (or, on a busy host,
// seconds) later — an instance's by kine and kube-apiserver once its record is written, the
// embedded Temporal server's by its services while it is built. A port the kernel picks for
// `listen :0` comes from its ephemeral range, the same range every outgoing connection on the
// host takes its local port from — and there are many of them (each API server's connections to
// its kine, kobe's clients, the tests' and users' clients). One of them can take the port in
// between, and the listener then fails with "bind: address already in use" (seen in `make
// bench`: an instance Failed out of a pool of 50; and in CI: the embedded Temporal server could
// not bind one of its services' ports). Ports outside the ephemeral range are never handed to an
// outgoing connection, so only another listener that chose the same port could take it; this
// process hands each out once, from a random start, and skips any a listener already holds.
//
// Above the ephemeral range first (61000-65535 with Linux's default 32768-60999): below it,
// 20000-30000 are the fake workload API servers of Cluster API's in-memory provider (fixed
// ports, testsuite/capimgmt) and 30000-32767 Kubernetes' NodePort range, which a kube-proxy on
// the host may answer on 127.0.0.1.

// listenPortsLow is the lowest port handed out when there is no room above the ephemeral range:
// above the usual fixed ports of the services a host runs beside kobe
// (PostgreSQL 5432, MariaDB 3306, NATS 4222, Redis 6379, …).
const listenPortsLow = 20000

// minListenPorts is the smallest range worth using; below it the kernel's pick is kept.
const minListenPorts = 1000

// Allocator hands out loopback ports outside the kernel's ephemeral range. A process uses one,
// the package's (Take): the local backend's instances and the embedded Temporal server share it,
// so that no two of its listeners are given one port.
type Allocator struct {
	mu     sync.Mutex
	lo, hi int // the range, [lo, hi]; hi == 0: not known yet
	next   int
	given  map[int]bool // handed out by this process
	// ephemeral reads the kernel's ephemeral range (a seam for tests).
	ephemeral func() (lo, hi int, err error)
}

var process = &Allocator{ephemeral: EphemeralRange}

// Take returns n distinct free loopback ports from the process's allocator; reserved (nil: none)
// names ports that are spoken for though nothing listens on them now (an instance asleep).
func Take(n int, reserved func(int) bool) ([]int, error) {
	if reserved == nil {
		reserved = func(int) bool { return false }
	}
	return process.Take(n, reserved)
}

// EphemeralRange reads the kernel's ephemeral port range, net.ipv4.ip_local_port_range.
func EphemeralRange() (int, int, error) {
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, 0, err
	}
	f := strings.Fields(string(data))
	if len(f) != 2 {
		return 0, 0, fmt.Errorf("ip_local_port_range: %q", data)
	}
	lo, err1 := strconv.Atoi(f[0])
	hi, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("ip_local_port_range: %q", data)
	}
	return lo, hi, nil
}

// listenRange is where instances listen: above the ephemeral range if there is room, else
// below it; ok is false when neither has minListenPorts ports (then the kernel picks).
func listenRange(ephLo, ephHi int) (lo, hi int, ok bool) {
	if 65535-ephHi >= minListenPorts {
		return ephHi + 1, 65535, true
	}
	if ephLo-listenPortsLow >= minListenPorts {
		return listenPortsLow, ephLo - 1, true
	}
	return 0, 0, false
}

// Take returns n distinct free loopback ports that this process has not handed out before
// (until the range is used up: then it starts over) and that reserved does not claim (the
// ports of instances that exist, running or asleep).
func (a *Allocator) Take(n int, reserved func(int) bool) ([]int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.hi == 0 {
		ephLo, ephHi, err := a.ephemeral()
		lo, hi, ok := listenRange(ephLo, ephHi)
		if err != nil || !ok {
			return kernelPorts(n)
		}
		a.lo, a.hi = lo, hi
		a.next = lo + rand.IntN(hi-lo+1) // another kobe on the host starts elsewhere
		a.given = map[int]bool{}
	}
	var out []int
	size := a.hi - a.lo + 1
	startedOver := false
	for tried := 0; len(out) < n; tried++ {
		if tried == size {
			if startedOver || len(a.given) == len(out) {
				return nil, fmt.Errorf("no free loopback port in %d-%d", a.lo, a.hi)
			}
			// Every port was handed out once: start over (but for this call's own).
			a.given, tried, startedOver = map[int]bool{}, 0, true
			for _, p := range out {
				a.given[p] = true
			}
		}
		p := a.next
		a.next++
		if a.next > a.hi {
			a.next = a.lo
		}
		if a.given[p] || reserved(p) || !Listenable(p) {
			continue
		}
		a.given[p] = true
		out = append(out, p)
	}
	return out, nil
}

// Listenable says whether nothing listens on the loopback port now.
func Listenable(port int) bool {
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

// kernelPorts asks the kernel for n free loopback ports (a host whose ephemeral range leaves no
// room for listenRange).
func kernelPorts(n int) ([]int, error) {
	var out []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close() // held until all are picked, so that they differ
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}
