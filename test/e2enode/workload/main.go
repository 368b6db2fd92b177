// Command workload is the end-to-end tests' container: as "pause" (the pod
// sandbox image) it waits for SIGTERM; otherwise it prints what a GPU
// container is given (the NVIDIA_ and ROTA_ environment, the /dev/nvidia*
// device nodes), one "env"/"dev" line each, then waits for SIGTERM.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	if filepath.Base(os.Args[0]) != "pause" {
		report()
	}
	<-stop
}

func report() {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "NVIDIA_") || strings.HasPrefix(kv, "ROTA_") {
			env = append(env, kv)
		}
	}
	sort.Strings(env)
	for _, kv := range env {
		fmt.Println("env", kv)
	}
	devs, _ := filepath.Glob("/dev/nvidia*")
	sort.Strings(devs)
	for _, d := range devs {
		fmt.Println("dev", d)
	}
	fmt.Println("ready")
}
