// Command pause is the process of a pod's sandbox container: it holds the pod's namespaces open,
// reaps the zombies of processes that end up as its children, and exits 0 on SIGTERM or SIGINT.
// It goes into the image registry.k8s.io/pause:3.10 (see the images package).
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range signals {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var status syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
