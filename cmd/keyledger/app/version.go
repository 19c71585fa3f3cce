package app

import (
	"fmt"
	"runtime"
)

func versionCommand(args []string, streams IOStreams) error {
	if len(args) != 0 {
		return usagef("version takes no arguments")
	}
	fmt.Fprintln(streams.Out, versionLine())
	return nil
}

func goVersion() string { return runtime.Version() }
