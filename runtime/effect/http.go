package effect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// DefaultHTTPLookupTimeout bounds one receipt lookup when NewHTTPBackend is given no client.
const DefaultHTTPLookupTimeout = 30 * time.Second

// maxReceiptBytes bounds what a lookup reads of a receipt.
const maxReceiptBytes = 1 << 20

// ErrMalformedReceipt is returned (wrapped) when a backend answers a lookup with a body that is not
// a receipt: not JSON, or without "committed". It is an error, never "not committed": a receipt
// nobody can read decides nothing.
var ErrMalformedReceipt = errors.New("malformed receipt")

// HTTPBackend is a Backend over an effect service's receipt endpoint:
//
//	GET {base}/effects/{idempotency key}
//
// answered 200 with a receipt JSON object ({"idempotency_key","committed","reference","time"}; other
// keys are ignored) or 404 when the service has no receipt for the key. The reference provider's
// effect service speaks it, and tool.RemotePut sends effects to it. The service knows effects by
// their own key only, so Query.BatchKey is not sent. It is safe for concurrent use.
type HTTPBackend struct {
	base   string
	client *http.Client
}

// NewHTTPBackend returns a backend for the effect service at baseURL (e.g.
// "http://127.0.0.1:8080/v1"); c is the HTTP client (nil: one with DefaultHTTPLookupTimeout).
func NewHTTPBackend(baseURL string, c *http.Client) *HTTPBackend {
	if c == nil {
		c = &http.Client{Timeout: DefaultHTTPLookupTimeout}
	}
	return &HTTPBackend{base: strings.TrimRight(baseURL, "/"), client: c}
}

// Lookup implements Backend. It returns found=false on 404; the receipt on 200 when it parses and
// has "committed" (ErrMalformedReceipt otherwise); and an error naming the status for any other
// answer, or the transport error when the service could not be asked. A receipt naming another key
// is returned as it is: the ledger refuses it (ErrUnrelatedReceipt).
func (b *HTTPBackend) Lookup(ctx context.Context, q Query) (Receipt, bool, error) {
	if q.IdempotencyKey == "" {
		return Receipt{}, false, errors.New("receipt lookup: empty idempotency key")
	}
	target := b.base + "/effects/" + url.PathEscape(q.IdempotencyKey)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return Receipt{}, false, fmt.Errorf("receipt lookup %s: %w", target, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := b.client.Do(req)
	if err != nil {
		return Receipt{}, false, fmt.Errorf("receipt lookup %s: %w", target, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxReceiptBytes))
	if err != nil {
		return Receipt{}, false, fmt.Errorf("receipt lookup %s: read answer: %w", target, err)
	}
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		return Receipt{}, false, nil
	default:
		return Receipt{}, false, fmt.Errorf("receipt lookup %s: status %d: %s", target, resp.StatusCode, oneLine(data))
	}
	var wire struct {
		IdempotencyKey string    `json:"idempotency_key"`
		BatchKey       string    `json:"batch_key"`
		Committed      *bool     `json:"committed"`
		Reference      string    `json:"reference"`
		Time           time.Time `json:"time"`
		PayloadSHA256  string    `json:"payload_sha256"`
	}
	if err := json.Unmarshal(data, &wire); err != nil {
		return Receipt{}, false, fmt.Errorf("receipt lookup %s: %w: %v", target, ErrMalformedReceipt, err)
	}
	if wire.Committed == nil {
		return Receipt{}, false, fmt.Errorf("receipt lookup %s: %w: no \"committed\" field", target, ErrMalformedReceipt)
	}
	return Receipt{IdempotencyKey: wire.IdempotencyKey, BatchKey: wire.BatchKey, Committed: *wire.Committed,
		Reference: wire.Reference, Time: wire.Time.UTC(), PayloadSHA256: wire.PayloadSHA256}, true, nil
}

// oneLine is a response body for an error message: at most 512 bytes, on one line.
func oneLine(data []byte) string {
	s := strings.Join(strings.Fields(string(data)), " ")
	if len(s) > 512 {
		s = s[:512] + "..."
	}
	return s
}
