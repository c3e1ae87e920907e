package soak

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// portOwner finds the process listening on a TCP port on this host (through /proc/net/tcp{,6}
// and the processes' socket descriptors) and returns its pid and command line. A lease's port
// that is still open after its instance was deleted is a leak only if our instance holds it:
// ports are reused, and other programs on the host may have taken it since.
func portOwner(port int) (int, string, error) {
	inodes := map[string]bool{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		file, err := os.Open(f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(file)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			// sl local_address rem_address st … inode (index 9); st 0A is LISTEN.
			if len(fields) < 10 || fields[3] != "0A" {
				continue
			}
			i := strings.LastIndexByte(fields[1], ':')
			if i < 0 {
				continue
			}
			if p, err := strconv.ParseInt(fields[1][i+1:], 16, 32); err == nil && int(p) == port {
				inodes[fields[9]] = true
			}
		}
		file.Close()
	}
	if len(inodes) == 0 {
		return 0, "", fmt.Errorf("nothing listens on port %d", port)
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/fd/*")
	for _, fd := range procs {
		link, err := os.Readlink(fd)
		if err != nil || !strings.HasPrefix(link, "socket:[") {
			continue
		}
		if inodes[strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")] {
			pidDir := filepath.Dir(filepath.Dir(fd))
			pid, _ := strconv.Atoi(filepath.Base(pidDir))
			cmd, _ := os.ReadFile(filepath.Join(pidDir, "cmdline"))
			return pid, strings.ReplaceAll(string(cmd), "\x00", " "), nil
		}
	}
	return 0, "", fmt.Errorf("port %d listens, owner not visible", port)
}

func TestPortOwnerFindsTheListener(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	pid, cmd, err := portOwner(port)
	require.NoError(t, err)
	assert.Equal(t, os.Getpid(), pid)
	assert.NotEmpty(t, cmd)
	l.Close()
	_, _, err = portOwner(port)
	assert.Error(t, err, "nothing listens once closed")
}
