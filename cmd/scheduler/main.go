// Command scheduler is kube-scheduler built with Rota's plugins. It runs the
// rota-scheduler profile beside the cluster's default scheduler.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register" // --logging-format=json
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"

	"github.com/rota-dev/rota/pkg/scheduler"
)

func main() {
	os.Exit(cli.Run(scheduler.NewCommand()))
}
