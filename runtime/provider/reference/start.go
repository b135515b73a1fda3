package reference

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Running is a reference provider listening on a TCP address (127.0.0.1 for
// Start). It is safe for concurrent use.
type Running struct {
	server  *Server
	http    *http.Server
	baseURL string

	stop      chan struct{} // closed by Close: ends the context watcher
	served    chan error    // receives Serve's result once
	closeOnce sync.Once
	closeErr  error
}

// Start validates cfg (see New), listens on 127.0.0.1:0 and serves the
// reference provider until Close is called or ctx is done, whichever comes
// first. It returns ErrInvalidConfig (wrapped) for a bad cfg, the effects
// database's error when cfg.EffectsDB cannot be opened, and the listen error
// when no port could be had.
func Start(ctx context.Context, cfg Config) (*Running, error) {
	return StartOn(ctx, "127.0.0.1:0", cfg)
}

// StartOn is Start on a chosen TCP address ("host:port"; port 0 picks a free
// one), for serving the reference provider standalone (`assay provider
// serve`). BaseURL uses the address actually bound. It returns
// ErrInvalidConfig (wrapped) for a bad cfg or an addr that is not host:port
// with a numeric port, ErrNotEffectsDB (wrapped) for a cfg.EffectsDB that is
// not an effects database, and the listen error otherwise (the port is taken,
// the host is not this machine's).
func StartOn(ctx context.Context, addr string, cfg Config) (*Running, error) {
	if _, port, err := net.SplitHostPort(addr); err != nil {
		return nil, fmt.Errorf("%w: listen address %q: %v", ErrInvalidConfig, addr, err)
	} else if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return nil, fmt.Errorf("%w: listen address %q: the port must be a number from 0 to 65535", ErrInvalidConfig, addr)
	}
	srv, err := New(cfg)
	if err != nil {
		return nil, err
	}
	if cfg.EffectsDB != "" {
		// A bad effects database path fails here, not at the first PUT.
		if _, err := srv.effects(ctx); err != nil {
			return nil, errors.Join(err, srv.Close())
		}
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("reference: listen on %s: %w", addr, err), srv.Close())
	}
	r := &Running{
		server:  srv,
		http:    &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second},
		baseURL: "http://" + ln.Addr().String() + "/v1",
		stop:    make(chan struct{}),
		served:  make(chan error, 1),
	}
	go func() { r.served <- r.http.Serve(ln) }()
	go func() {
		select {
		case <-ctx.Done():
			_ = r.Close()
		case <-r.stop:
		}
	}()
	return r, nil
}

// BaseURL is "http://127.0.0.1:PORT/v1", the value for an OpenAI client's
// base URL.
func (r *Running) BaseURL() string { return r.baseURL }

// Server is the running Server, for its turn counters.
func (r *Running) Server() *Server { return r.server }

// Done is closed when the server has stopped (Close, or ctx done).
func (r *Running) Done() <-chan struct{} { return r.stop }

// Close stops the server at once: it closes the listener and every
// connection, so a request still in flight fails, and then the effects
// database. (A graceful drain is not
// offered: net/http waits up to 5 s for connections that were opened but
// never used, which a closing harness should not pay for.) It returns the
// serve error, if the server had failed, or the close error. Calling it
// again returns the first result.
func (r *Running) Close() error {
	r.closeOnce.Do(func() {
		close(r.stop)
		closeErr := r.http.Close()
		if closeErr != nil {
			closeErr = fmt.Errorf("reference: close %s: %w", r.baseURL, closeErr)
		}
		serveErr := <-r.served
		if errors.Is(serveErr, http.ErrServerClosed) {
			serveErr = nil
		}
		if serveErr != nil {
			serveErr = fmt.Errorf("reference: serve %s: %w", r.baseURL, serveErr)
		}
		r.closeErr = errors.Join(serveErr, closeErr, r.server.Close())
	})
	return r.closeErr
}
