package main

import (
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// refuseEmptyFlags refuses, as bad input, a flag of c given explicitly with
// an empty value (for a list flag, an empty element): --pattern "" would
// otherwise read as "not given" and run with the default; and a negative
// --wait, which a command that opens no store would otherwise ignore.
func refuseEmptyFlags(c *cobra.Command) error {
	var err error
	c.Flags().Visit(func(f *pflag.Flag) {
		if err != nil {
			return
		}
		switch f.Value.Type() {
		case "duration":
			// --wait is how long to wait for a store's holder: a negative one is refused by every
			// command, whether or not this run opens a store.
			if f.Name == "wait" && strings.HasPrefix(f.Value.String(), "-") {
				err = usageErrorf("--wait %s is negative (0 means not to wait)", f.Value.String())
			}
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
