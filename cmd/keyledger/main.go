// Command keyledger runs exactly-once operations on Kubernetes Secrets,
// journaled in PostgreSQL. See the README for the commands and exit codes.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/keyledger/keyledger/cmd/keyledger/app"
	"github.com/keyledger/keyledger/phase"
)

func main() {
	phase.Main()
	app.TuneCollector(os.LookupEnv)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := app.Run(ctx, os.Args[1:], app.StdStreams())
	stop()
	code := app.ExitCode(err)
	app.WriteTerminationMessage(err)
	phase.Write(os.Stderr)
	os.Exit(code)
}
