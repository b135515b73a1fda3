package harness

import (
	"fmt"
	"io"
	"sync"

	"github.com/assay-audit/assay/runtime/policy"
)

// lineWriter writes whole progress lines, one at a time, redacted.
type lineWriter struct {
	mu       sync.Mutex
	w        io.Writer
	redactor *policy.Redactor
}

func (l *lineWriter) line(format string, args ...any) {
	if l.w == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintln(l.w, l.redactor.String(fmt.Sprintf(format, args...)))
}
