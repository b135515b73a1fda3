package tool

import (
	"context"
	"fmt"
)

// Pause stops every call that has not yet been dispatched at its next checkpoint; calls already
// dispatched finish. It is idempotent.
func (b *Boundary) Pause() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.paused {
		b.paused = true
		b.resumed = make(chan struct{})
	}
}

// Resume lets paused calls continue: each re-checks and dispatches exactly once.
func (b *Boundary) Resume() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.paused {
		b.paused = false
		close(b.resumed)
	}
}

// Paused reports whether the boundary is paused and how many calls are parked at the pause.
func (b *Boundary) Paused() (paused bool, waiting int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.paused, b.waiting
}

// waitIfPaused parks the caller while the boundary is paused; ctx ending while parked is an error
// (the call is then not dispatched).
func (b *Boundary) waitIfPaused(ctx context.Context) error {
	for {
		b.mu.Lock()
		if !b.paused {
			b.mu.Unlock()
			return nil
		}
		ch := b.resumed
		b.waiting++
		b.mu.Unlock()
		select {
		case <-ch:
			b.mu.Lock()
			b.waiting--
			b.mu.Unlock()
		case <-ctx.Done():
			b.mu.Lock()
			b.waiting--
			b.mu.Unlock()
			return fmt.Errorf("paused, and the caller stopped waiting: %w", ctx.Err())
		}
	}
}
