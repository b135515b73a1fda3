//go:build linux

package oracle

import "testing"

func TestParseProcStat(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		stat      string
		wantState byte
		wantPgrp  int
		wantOK    bool
	}{
		{name: "plain", stat: "123 (sleep) S 1 120 120 0 -1", wantState: 'S', wantPgrp: 120, wantOK: true},
		{name: "comm with spaces and parens", stat: "123 (a) (b c) Z 1 77 77 0", wantState: 'Z', wantPgrp: 77, wantOK: true},
		{name: "truncated", stat: "123 (x) R", wantOK: false},
		{name: "no comm", stat: "garbage", wantOK: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			state, pgrp, ok := parseProcStat([]byte(tt.stat))
			if ok != tt.wantOK || (ok && (state != tt.wantState || pgrp != tt.wantPgrp)) {
				t.Fatalf("parseProcStat(%q) = %q, %d, %v; want %q, %d, %v", tt.stat, state, pgrp, ok, tt.wantState, tt.wantPgrp, tt.wantOK)
			}
		})
	}
}
