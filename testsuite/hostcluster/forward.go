package hostcluster

import (
	"io"
	"net"
	"sync"
	"testing"
)

// ForwardToMachine makes a server of this machine that listens on loopback only (PostgreSQL at
// 127.0.0.1:5432, MariaDB, NATS) reachable from the node's pods, which have no route beyond the
// node: a TCP proxy on the node's bridge address (NodeIP), on a free port, that forwards every
// connection to target. It returns NodeIP:port, which this machine reaches too (the bridge's
// address is its own), so a URL with it works for kobe and for the pods alike. The proxy stops
// at the end of the test.
func (c *RealCluster) ForwardToMachine(t testing.TB, target string) string {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(c.NodeIP, "0"))
	if err != nil {
		t.Fatalf("hostcluster: listening on the node's address for %s: %v", target, err)
	}
	var (
		mu    sync.Mutex
		conns = map[net.Conn]bool{}
		wg    sync.WaitGroup
	)
	track := func(cs ...net.Conn) bool {
		mu.Lock()
		defer mu.Unlock()
		if conns == nil { // stopped
			return false
		}
		for _, c := range cs {
			conns[c] = true
		}
		return true
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			if !track(in, out) {
				in.Close()
				out.Close()
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				pipe(in, out)
			}()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		conns = nil
		mu.Unlock()
		wg.Wait()
	})
	return l.Addr().String()
}

// pipe copies both ways until either side closes, then closes both.
func pipe(a, b net.Conn) {
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go cp(a, b)
	go cp(b, a)
	<-done
	a.Close()
	b.Close()
	<-done
}
