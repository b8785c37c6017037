package main

import (
	"fmt"

	"github.com/rlm-sandbox/rlm-sandbox/runtime"
	"github.com/spf13/cobra"
)

func newPrepareCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "prepare",
		Short: "Compile Pyodide and its standard library into the cache (what `make` runs)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := runtime.PrepareStdlib(cmd.Context(), runtime.Config{Notice: cmd.ErrOrStderr()})
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), "ready:", p)
			return nil
		},
	}
}
