// Command schedule-controller runs Rota's DeploySchedule controller (`run`) and
// the offline timeline dry run (`timeline`); see app.NewRootCommand.
package main

import (
	"os"
	_ "time/tzdata" // time zones without the host's zoneinfo, e.g. in distroless images

	"github.com/rota-dev/rota/cmd/schedule-controller/app"
)

func main() {
	os.Exit(app.Run(os.Args[1:], os.Stdout, os.Stderr))
}
