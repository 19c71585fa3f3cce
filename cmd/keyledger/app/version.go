package app

import (
	"encoding/json"
	"fmt"
	"runtime"
)

func versionCommand(args []string, streams IOStreams) error {
	if len(args) != 0 {
		return usagef("version takes no arguments")
	}
	b, _ := json.Marshal(map[string]string{"version": Version, "go": runtime.Version()})
	fmt.Fprintln(streams.Out, string(b))
	return nil
}
