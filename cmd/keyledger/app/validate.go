package app

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow/command"
)

// validation is what validate reports about a valid command file.
type validation struct {
	Valid      bool   `json:"valid"`
	Kind       string `json:"kind"`
	MutationID string `json:"mutationId"`
	// Warnings are what run would still refuse of the file where it is,
	// but not of its content: a file holding values that others may read.
	Warnings []string `json:"warnings,omitempty"`
}

func newValidateCommand(streams IOStreams, g *commonFlags) *cobra.Command {
	var fsGroup int
	var out outputFlag
	cmd := &cobra.Command{
		Use:   "validate COMMAND_FILE",
		Short: "check a command file as run does, offline; contacts nothing",
		Long: `Check a command file with the decoder and the checks run makes before it contacts anything:
the strict decoding (unknown, duplicate or mistyped members, named with their line and column,
and the member that was probably meant), the family's rules on every field, the environment
settings run reads, and the database URL's form when one is given. It contacts no cluster and no
database. A relative path is taken from the current directory (run wants an absolute one).

A file holding values (SecretUpdate) that others may read passes with a warning: run refuses it
until it is private (chmod 600), wherever it is read from.`,
		Example: `  keyledger validate examples/key-retirement.json
  keyledger validate -o json /abs/path/update.json`,
		Args:              cobra.ArbitraryArgs,
		ValidArgsFunction: fileCompletion("json"),
		RunE: func(_ *cobra.Command, args []string) error {
			if err := g.checkLogFlags(); err != nil {
				return err
			}
			if err := out.check(); err != nil {
				return err
			}
			if len(args) != 1 {
				return usagef("validate takes exactly one command file, got %d arguments", len(args))
			}
			v, err := validateFile(args[0], fsGroup, g)
			if err != nil {
				return err
			}
			if out.format != formatTable {
				return writeStructured(streams.Out, out.format, v)
			}
			fmt.Fprintf(streams.Out, "valid: %s %s\n", v.Kind, v.MutationID)
			for _, w := range v.Warnings {
				fmt.Fprintf(streams.ErrOut, "keyledger validate: warning: %s\n", w)
			}
			return nil
		},
	}
	addFSGroup(cmd, &fsGroup)
	addOutput(cmd, &out, formatTable, formatJSON, formatYAML)
	return cmd
}

// notPrivateWarning is validate's warning for a file holding values that
// run would refuse to read.
const notPrivateWarning = "the file holds values and others may read it: run refuses it until it is private (chmod 600)"

// validateFile runs what run runs before it contacts anything, on the file
// at path (relative to the current directory).
func validateFile(path string, fsGroup int, g *commonFlags) (*validation, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, usagef("validate: %v", err)
	}
	pr, f, err := loadCommand(abs, fsGroup)
	var fe *command.FileError
	var warnings []string
	if errors.As(err, &fe) && fe.Reason == command.ReasonNotPrivate && f != nil {
		// The content is checked all the same: the mode is where the file
		// lies, not what it says.
		warnings = append(warnings, notPrivateWarning)
		private := *f
		private.Mode &^= 0o077
		pr, err = loadFile(&private)
	}
	if err != nil {
		return nil, locateInvalid(err, f)
	}
	if url, err := g.database(); err == nil {
		if err := store.CheckURL(url); err != nil {
			return nil, err
		}
	}
	return &validation{Valid: true, Kind: pr.kind, MutationID: pr.mutationID, Warnings: warnings}, nil
}

// locateInvalid adds where a family's refusal of a member lies in the
// file (the decoder's own refusals carry it already).
func locateInvalid(err error, f *command.File) error {
	var located *command.LocatedError
	var invalid *command.InvalidError
	if f == nil || errors.As(err, &located) || !errors.As(err, &invalid) || invalid.Field == "" {
		return err
	}
	line, column, ok := command.Locate(f.Bytes, invalid.Field)
	if !ok {
		return err
	}
	return &command.LocatedError{InvalidError: invalid, Line: line, Column: column}
}
