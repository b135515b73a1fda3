package harness

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// terminalDisplay is the terminal style of progress: one bar (github.com/schollz/progressbar/v3)
// counting finished cases, its description the ETA and each running case's phase, redrawn in place
// on every change and every second; lines are printed above it. Its methods are called with the
// owning progress's lock held, except stopTicker.
type terminalDisplay struct {
	w        io.Writer
	bar      *progressbar.ProgressBar
	describe func() string
	// width is the terminal's width in columns (100 when it cannot be read); the description is cut
	// to fit, so the bar never wraps (a wrapped line cannot be redrawn in place).
	width int
	// finished is the count of finished cases the bar shows.
	finished   int
	stop, done chan struct{}
}

// barColumns is about what the bar, its count and elapsed time take besides the description.
const barColumns = 45

func newTerminalDisplay(w io.Writer, total int, describe func() string) *terminalDisplay {
	width := 100
	if f, ok := w.(*os.File); ok {
		if cols, _, err := term.GetSize(int(f.Fd())); err == nil && cols > 0 {
			width = cols
		}
	}
	d := &terminalDisplay{w: w, describe: describe, width: width}
	d.bar = progressbar.NewOptions(total,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetWidth(15),
		progressbar.OptionShowCount(),
		progressbar.OptionSetElapsedTime(true),
		// The library's own prediction is a rate over the bar's counts; the ETA shown is
		// EstimateRemaining's, in the description, and says "unknown" until a case finished.
		progressbar.OptionSetPredictTime(false),
		progressbar.OptionShowDescriptionAtLineEnd(),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionSetRenderBlankState(false),
	)
	return d
}

// startTicker redraws the display every interval (elapsed times move while nothing else does),
// calling redraw, which must take the progress's lock.
func (d *terminalDisplay) startTicker(interval time.Duration, redraw func()) {
	d.stop, d.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(d.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-d.stop:
				return
			case <-t.C:
				redraw()
			}
		}
	}()
}

// stopTicker stops the redraws and waits for the last one; it must not be called with the
// progress's lock held.
func (d *terminalDisplay) stopTicker() {
	if d.stop == nil {
		return
	}
	close(d.stop)
	<-d.done
	d.stop = nil
}

// refresh redraws the bar with done cases finished.
func (d *terminalDisplay) refresh(done int) {
	d.bar.Describe(d.fit(d.describe())) // redraws
	if done != d.finished {
		d.finished = done
		_ = d.bar.Set(done)
	}
}

// printAbove erases the bar and prints s on its own line; refresh draws the bar again below it.
func (d *terminalDisplay) printAbove(s string) {
	_ = d.bar.Clear()
	fmt.Fprintln(d.w, s)
}

// close erases the bar; what was printed above it stays.
func (d *terminalDisplay) close() {
	_ = d.bar.Clear()
}

// fit cuts s to the columns the terminal leaves the description, marking the cut with "…".
func (d *terminalDisplay) fit(s string) string {
	room := max(d.width-barColumns, 20)
	r := []rune(s)
	if len(r) <= room {
		return s
	}
	return string(r[:room-1]) + "…"
}
