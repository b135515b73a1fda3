package harness

import (
	"errors"
	"fmt"
)

// ErrBadOptions is returned (wrapped, naming the problem) for options or a request that cannot
// run: an *OptionError naming the field, or a provider the preflight refused. Nothing was written
// when it is returned.
var ErrBadOptions = errors.New("invalid options")

// OptionError names the field of Options (or of a request: ReconcileRequest, ApprovalQuery,
// Grant, EffectsQuery) that was refused, and why. Its text is the field's Go name followed by the
// reason ("Concurrency -1 is negative"); a command shows its own flag names instead. It unwraps to
// ErrBadOptions.
type OptionError struct {
	// Field is the refused field's Go name, e.g. "Concurrency".
	Field string
	// Reason follows the field name: e.g. "-1 is negative", "is required with BaseURL".
	Reason string
	// Related are the other fields Reason names by their Go names (e.g. "BaseURL"), in order.
	Related []string
}

func (e *OptionError) Error() string { return e.Field + " " + e.Reason }

// Unwrap returns ErrBadOptions.
func (e *OptionError) Unwrap() error { return ErrBadOptions }

// optionErr returns ErrBadOptions wrapping an *OptionError for field: "invalid options: FIELD
// REASON".
func optionErr(field, format string, args ...any) error {
	return fmt.Errorf("%w: %w", ErrBadOptions, &OptionError{Field: field, Reason: fmt.Sprintf(format, args...)})
}

// optionErrRelated is optionErr for a reason that names other fields (related, by their Go names).
func optionErrRelated(field string, related []string, format string, args ...any) error {
	return fmt.Errorf("%w: %w", ErrBadOptions, &OptionError{Field: field, Reason: fmt.Sprintf(format, args...), Related: related})
}
