package cassette_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/assay-audit/assay/runtime/provider"
	"github.com/assay-audit/assay/runtime/provider/cassette"
	"github.com/assay-audit/assay/runtime/provider/reference"
)

// record sends the requests through the runtime's client to a live reference provider and keeps
// each exchange as the runtime records it.
func record(t *testing.T, faults []reference.Fault, stream bool, reqs ...provider.Request) ([]cassette.Exchange, []*provider.Response) {
	t.Helper()
	srv, err := reference.New(reference.Config{Faults: faults})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	client, err := provider.NewClient(provider.ClientConfig{BaseURL: hs.URL + "/v1", RetryBaseDelay: 1})
	if err != nil {
		t.Fatal(err)
	}
	var out []cassette.Exchange
	var resps []*provider.Response
	for i, r := range reqs {
		r.Stream = stream
		resp, err := client.Complete(context.Background(), r)
		if err != nil {
			t.Fatalf("record request %d: %v", i, err)
		}
		media := "application/json"
		if stream {
			media = "text/event-stream"
		}
		out = append(out, cassette.Exchange{Session: r.SessionID, Member: strings.TrimPrefix(r.SessionID, "run-1-"), Seq: r.Seq,
			RequestSHA256: resp.RequestSHA256, Request: resp.RequestBody, Status: resp.Status, MediaType: media,
			Response: resp.Raw, Attempts: resp.Attempts, Order: int64(10 * (i + 1))})
		resps = append(resps, resp)
	}
	return out, resps
}

func request(session string, seq int, text string) provider.Request {
	return provider.Request{SessionID: session, Seq: seq, Model: reference.ModelID,
		Messages: []provider.Message{{Role: "system", Content: "goal"}, {Role: "user", Content: text}}}
}

// what the runtime makes of a response: everything but the latency, which is the client's clock.
func understood(r *provider.Response) provider.Response {
	c := *r
	c.Latency = 0
	return c
}

func TestTheRecordedAnswersAreServedToTheSameRequests(t *testing.T) {
	for _, stream := range []bool{false, true} {
		reqs := []provider.Request{request("run-1-exec-1", 0, "first"), request("run-1-exec-2", 0, "other"), request("run-1-exec-1", 1, "second")}
		xs, recorded := record(t, nil, stream, reqs...)
		c := cassette.New("", xs)
		client, err := c.Client()
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range reqs {
			r.Stream = stream
			got, err := client.Complete(context.Background(), r)
			if err != nil {
				t.Fatalf("stream=%v request %d: %v", stream, i, err)
			}
			if diff := cmp.Diff(understood(recorded[i]), understood(got)); diff != "" {
				t.Errorf("stream=%v request %d: the replayed response differs (-recorded +replayed):\n%s", stream, i, diff)
			}
		}
		if d := c.Divergences(); len(d) != 0 {
			t.Errorf("stream=%v: divergences %+v", stream, d)
		}
		if c.Asked() != 3 {
			t.Errorf("asked %d", c.Asked())
		}
	}
}

func TestARetriedExchangeIsRetriedAsOftenAsRecorded(t *testing.T) {
	xs, recorded := record(t, []reference.Fault{{Member: "exec-1", Turn: 0, Kind: reference.FaultHTTP500}}, false, request("run-1-exec-1", 0, "x"))
	if recorded[0].Attempts != 2 {
		t.Fatalf("the fault should cost one retry, attempts %d", recorded[0].Attempts)
	}
	c := cassette.New("", xs)
	client, _ := c.Client()
	got, err := client.Complete(context.Background(), request("run-1-exec-1", 0, "x"))
	if err != nil {
		t.Fatal(err)
	}
	if got.Attempts != 2 || got.Message.Content != recorded[0].Message.Content {
		t.Errorf("attempts %d, content %q; recorded %d, %q", got.Attempts, got.Message.Content, recorded[0].Attempts, recorded[0].Message.Content)
	}
}

func TestADifferentRequestIsADivergenceNamingTheField(t *testing.T) {
	xs, _ := record(t, nil, false, request("run-1-exec-1", 0, "first"), request("run-1-exec-1", 1, "second"))
	c := cassette.New("", xs)
	client, _ := c.Client()
	if _, err := client.Complete(context.Background(), request("run-1-exec-1", 0, "first")); err != nil {
		t.Fatal(err)
	}
	_, err := client.Complete(context.Background(), request("run-1-exec-1", 1, "changed"))
	var he *provider.HTTPError
	if !errors.As(err, &he) || he.Status != 409 {
		t.Fatalf("a diverging request must not get the recorded answer: %v", err)
	}
	d := c.Divergences()
	if len(d) != 1 {
		t.Fatalf("divergences %+v", d)
	}
	want := cassette.Divergence{Session: "run-1-exec-1", Member: "exec-1", Seq: 1, Order: 20, Pointer: "/messages/1/content",
		Recorded: []byte(`"second"`), Replayed: []byte(`"changed"`)}
	got := d[0]
	got.Detail = ""
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("divergence (-want +got):\n%s", diff)
	}
}

func TestExtraAndUnaskedRequestsAreDivergences(t *testing.T) {
	xs, _ := record(t, nil, false, request("run-1-exec-1", 0, "first"), request("run-1-exec-2", 0, "other"))
	c := cassette.New("", xs)
	client, _ := c.Client()
	if _, err := client.Complete(context.Background(), request("run-1-exec-1", 0, "first")); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Complete(context.Background(), request("run-1-exec-1", 1, "more")); err == nil {
		t.Fatal("a request beyond the recording must fail")
	}
	d := c.Divergences()
	if len(d) != 2 {
		t.Fatalf("divergences %+v", d)
	}
	// exec-2's recorded request (order 20) was never sent; exec-1 sent one more after its last
	// (order 10): ordered by where they stand in the recording.
	if d[0].Session != "run-1-exec-1" || d[0].Seq != 1 || d[0].Replayed == nil || d[1].Session != "run-1-exec-2" || d[1].Seq != 0 || d[1].Recorded == nil {
		t.Errorf("divergences %+v", d)
	}
}
