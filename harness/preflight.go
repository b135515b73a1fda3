package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// preflight asks the provider for its models (GET {base}/models, OpenAI's list-models endpoint)
// directly, not through the gateway, so that nothing of a run is recorded. An unreachable
// provider, a refused key, an error status, or a model list that lacks the requested model is an
// error; a provider without the endpoint (404, 405, 501) is given the benefit of the doubt, since
// the cases themselves then show what it serves.
func preflight(ctx context.Context, o Options) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(o.BaseURL, "/")+"/models", nil)
	if err != nil {
		return fmt.Errorf("provider %s: %v", o.BaseURL, err)
	}
	if o.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+o.APIKey)
	}
	resp, err := newHTTPClient().Do(req)
	if err != nil {
		return fmt.Errorf("provider %s is unreachable: %v", o.BaseURL, errors.Unwrap(err))
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return optionErr("APIKey", "was refused by provider %s (status %d to GET /models): check it", o.BaseURL, resp.StatusCode)
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed || resp.StatusCode == http.StatusNotImplemented:
		return nil
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("provider %s answered GET /models with status %d; is it OpenAI-compatible?", o.BaseURL, resp.StatusCode)
	}
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 8<<20)).Decode(&list); err != nil || list.Data == nil {
		return fmt.Errorf("provider %s answered GET /models with something that is not an OpenAI model list; is it OpenAI-compatible?", o.BaseURL)
	}
	var ids []string
	for _, m := range list.Data {
		if m.ID == o.Model {
			return nil
		}
		ids = append(ids, m.ID)
	}
	if len(ids) > 10 {
		ids = append(ids[:10], "...")
	}
	return fmt.Errorf("provider %s does not list model %q (it lists: %s)", o.BaseURL, o.Model, strings.Join(ids, ", "))
}

// httpTimeout bounds each HTTP exchange the harness makes itself (the provider's model list, the
// gateway's usage endpoint), from connecting to the end of the body: a server that accepts and
// never answers fails the request instead of hanging the run.
const httpTimeout = 30 * time.Second

// newHTTPClient returns an HTTP client of the harness's own for those exchanges, with httpTimeout.
// http.DefaultClient is shared with every package in the process, any of which may change it, and
// has no timeout.
func newHTTPClient() *http.Client { return &http.Client{Timeout: httpTimeout} }
