// Command schedule-controller is Rota's DeploySchedule tool. Today it offers the
// timeline dry run; the controller itself comes later (see app.NewRootCommand).
package main

import (
	"os"
	_ "time/tzdata" // time zones without the host's zoneinfo, e.g. in distroless images

	"github.com/rota-dev/rota/cmd/schedule-controller/app"
)

func main() {
	os.Exit(app.Run(os.Args[1:], os.Stdout, os.Stderr))
}
