// Command pause stands in for the Kubernetes pause image in the test bed,
// whose machines cannot pull registry.k8s.io: it holds a pod sandbox open
// until the runtime stops it, reaping any orphans meanwhile, as PID 1 must.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			return
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
