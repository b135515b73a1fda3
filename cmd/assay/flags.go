package main

import (
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// refuseEmptyFlags refuses, as bad input, a flag of c given explicitly with
// an empty value (for a list flag, an empty element): --pattern "" would
// otherwise read as "not given" and run with the default.
func refuseEmptyFlags(c *cobra.Command) error {
	var err error
	c.Flags().Visit(func(f *pflag.Flag) {
		if err != nil {
			return
		}
		switch f.Value.Type() {
		case "string":
			if f.Value.String() == "" {
				if f.DefValue != "" {
					err = usageErrorf("--%s is empty; leave it out for the default (%q)", f.Name, f.DefValue)
				} else {
					err = usageErrorf("--%s is empty: give a value, or leave the flag out", f.Name)
				}
			}
		case "stringSlice", "stringArray":
			if sv, ok := f.Value.(pflag.SliceValue); ok {
				for _, s := range sv.GetSlice() {
					if s == "" {
						err = usageErrorf("--%s has an empty value", f.Name)
						return
					}
				}
				if len(sv.GetSlice()) == 0 {
					err = usageErrorf("--%s is empty; leave it out for the default", f.Name)
				}
			}
		}
	})
	return err
}
