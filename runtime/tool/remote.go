package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"time"
)

// RemotePutName is the name of the remote_put tool.
const RemotePutName = "remote_put"

// DefaultRemotePutTimeout bounds one remote_put request when RemotePut is given no client.
const DefaultRemotePutTimeout = 30 * time.Second

// maxRemoteValueBytes bounds a remote_put value (bytes), as write_file bounds content.
const maxRemoteValueBytes = maxFileBytes

// maxRemoteResponseBytes bounds what remote_put reads of a response.
const maxRemoteResponseBytes = 1 << 20

type remotePutArgs struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// remoteReceipt is the part of an effect service receipt remote_put checks.
type remoteReceipt struct {
	IdempotencyKey string `json:"idempotency_key"`
	Committed      *bool  `json:"committed"`
	Reference      string `json:"reference"`
}

// RemotePut returns the remote_put tool: access mode Network, arguments {"name","value"} (strings;
// name not empty, value at most 1 MiB), touching no path of the member's directory. It commits value
// under name at an effect service by sending
//
//	PUT {baseURL}/effects/{idempotency key}    Idempotency-Key: {idempotency key}
//	{"name":"...","value":"..."}
//
// where the key is the boundary's (IdempotencyKey: "{run_id}:{member_id}:{call_id}", path-escaped),
// so the service commits once per key and reconciliation can look the receipt up by it (the
// reference provider serves this protocol; effect.HTTPBackend reads its receipts). baseURL is the
// service's base, e.g. "http://127.0.0.1:8080/v1". c is the HTTP client (nil: one with
// DefaultRemotePutTimeout); each call uses a fresh connection and is never re-sent by the
// transport, so one call is at most one PUT.
//
// Outcomes: a 2xx answer carrying a committed receipt for the key is the result (the receipt is in
// the text the model sees). A 4xx answer is a failure: the service refused it and committed nothing.
// Everything after the request may have reached the service — a 5xx answer, a 2xx answer without a
// receipt for this key, a 1xx/3xx answer, a timeout or a connection lost before the answer — is an
// error wrapping ErrIndeterminate: the boundary records the effect unknown, reconciliation required,
// and never retries it. A call that never got a connection (the service is down) fails plainly:
// nothing was sent. The tool is safe for concurrent use.
func RemotePut(baseURL string, c *http.Client) Tool {
	if c == nil {
		c = &http.Client{Timeout: DefaultRemotePutTimeout}
	}
	base := strings.TrimRight(baseURL, "/")
	return Tool{
		Name: RemotePutName,
		Doc: "Publish a value under a name at the team's remote effect service. The service commits it once and answers " +
			"with a receipt. Use it only when your task says to publish.",
		Access: Network,
		Parameters: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string","minLength":1,"maxLength":256,` +
			`"description":"the name to publish under"},"value":{"type":"string","description":"the value to publish"}},` +
			`"required":["name","value"],"additionalProperties":false}`),
		Paths: func(json.RawMessage) ([]string, error) { return nil, nil },
		Run: func(ctx context.Context, _ *os.Root, raw json.RawMessage) (string, error) {
			var a remotePutArgs
			if err := decodeStrict(raw, &a, "name", "value"); err != nil {
				return "", err
			}
			if strings.TrimSpace(a.Name) == "" {
				return "", fmt.Errorf("%w: field \"name\" is empty", ErrInvalidArguments)
			}
			if len(a.Value) > maxRemoteValueBytes {
				return "", fmt.Errorf("%w: value is %d bytes, limit %d", ErrInvalidArguments, len(a.Value), maxRemoteValueBytes)
			}
			key := IdempotencyKey(ctx)
			if key == "" {
				return "", errors.New("remote_put runs only through the tool boundary, which gives it the idempotency key; nothing was sent")
			}
			return remotePut(ctx, c, base, key, a)
		},
	}
}

func remotePut(ctx context.Context, c *http.Client, base, key string, a remotePutArgs) (string, error) {
	body, err := json.Marshal(a)
	if err != nil {
		return "", fmt.Errorf("remote_put %s: encode body: %w", a.Name, err)
	}
	target := base + "/effects/" + url.PathEscape(key)
	// connected is set once a connection to the service exists: from then on the request may have
	// reached it, and a failure is indeterminate.
	var connected atomic.Bool
	trace := &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) { connected.Store(true) }}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), http.MethodPut, target, bytes.NewReader(body))
	if err != nil {
		return "", fmt.Errorf("remote_put %s: %w; nothing was sent", a.Name, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	// Without GetBody net/http never re-sends the request on its own (an Idempotency-Key header
	// would otherwise make it replayable), and with Close no stale pooled connection is reused: one
	// call is at most one PUT.
	req.GetBody = nil
	req.Close = true
	resp, err := c.Do(req)
	if err != nil {
		if connected.Load() {
			return "", fmt.Errorf("%w: remote_put %s to %s: the request may have reached the service and no answer came: %v",
				ErrIndeterminate, a.Name, target, err)
		}
		return "", fmt.Errorf("remote_put %s: could not connect to %s: %v; nothing was sent", a.Name, target, err)
	}
	defer resp.Body.Close()
	data, readErr := io.ReadAll(io.LimitReader(resp.Body, maxRemoteResponseBytes))
	switch {
	case resp.StatusCode >= 400 && resp.StatusCode < 500:
		return "", fmt.Errorf("remote_put %s: the service refused it with status %d: %s; nothing was committed",
			a.Name, resp.StatusCode, errorText(data))
	case resp.StatusCode >= 500:
		return "", fmt.Errorf("%w: remote_put %s: the service answered status %d after receiving the request (it may have committed): %s",
			ErrIndeterminate, a.Name, resp.StatusCode, errorText(data))
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return "", fmt.Errorf("%w: remote_put %s: unexpected status %d", ErrIndeterminate, a.Name, resp.StatusCode)
	case readErr != nil:
		return "", fmt.Errorf("%w: remote_put %s: status %d, but the answer was lost: %v", ErrIndeterminate, a.Name, resp.StatusCode, readErr)
	}
	var rc remoteReceipt
	if err := json.Unmarshal(data, &rc); err != nil || rc.Committed == nil || !*rc.Committed || rc.IdempotencyKey != key {
		return "", fmt.Errorf("%w: remote_put %s: status %d without a committed receipt for key %s: %s",
			ErrIndeterminate, a.Name, resp.StatusCode, key, errorText(data))
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, data); err != nil {
		compact.Write(data)
	}
	return fmt.Sprintf("published %q: receipt %s", a.Name, compact.String()), nil
}

// errorText is a response body for an error message: at most 512 bytes, on one line.
func errorText(data []byte) string {
	s := strings.Join(strings.Fields(string(data)), " ")
	if len(s) > 512 {
		s = s[:512] + "..."
	}
	if s == "" {
		return "(empty body)"
	}
	return s
}
