package replay

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/internal/jsondiff"
	"github.com/assay-audit/assay/runtime/event"
)

// against compares two live runs recorded under the same envelope — the same case run twice
// against a provider — exchange by exchange, per member: each request as sent and each reply as
// the runtime understood it (the parsed reply stored beside the raw bytes), in order, under the
// runs' tolerance policy. The first place they differ is where the provider's answers (or what
// they led the members to ask) diverged. Nothing is executed and nothing is written.
func against(ctx context.Context, store *evidence.Store, runs []evidence.RunSummary, pair []evidence.RunSummary, opts Options) (Result, error) {
	start := time.Now()
	a, b := pair[0], pair[1]
	res := Result{RunID: a.RunID, AgainstRunID: b.RunID, Formation: a.Envelope.Formation}
	asked, recorded, pre := (&replayer{opts: opts}).tolerances(a, nil)
	res.Tolerance = asked.ID()
	done := func(d *decision) (Result, error) {
		res.Verdict, res.Reason, res.Seconds = d.verdict, d.reason, time.Since(start).Seconds()
		return res, nil
	}
	if pre != nil {
		return done(pre)
	}
	if d := sameEnvelope(a, b); d != nil {
		return done(d)
	}
	if d := refusal(nil, asked, recorded); d != nil {
		return done(d)
	}
	r := &replayer{store: store, runs: runs, opts: opts}
	var recs []*recording
	for _, run := range pair {
		got, d, err := r.certify(ctx, []evidence.RunSummary{run}, recorded)
		if err != nil {
			return res, err
		}
		if d != nil {
			return done(d)
		}
		recs = append(recs, got[0])
	}
	c := &comparison{policy: recorded, runID: a.RunID}
	ia, err := exchangeItems(ctx, store, recs[0])
	if err != nil {
		return res, err
	}
	ib, err := exchangeItems(ctx, store, recs[1])
	if err != nil {
		return res, err
	}
	c.streams(ia, ib)
	res.NotCompared, res.Differences, res.FirstDivergence = notCompared(recorded), c.diffs, first(c.divs)
	res.Verdict, res.Reason = verdictOf(res.FirstDivergence, res.Differences)
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}

// sameEnvelope refuses two runs whose envelopes differ in anything but the environment
// fingerprint (two machines may record the same case), the invocation and the repeat index (each
// run is its own: two repeats of one case are the same case).
func sameEnvelope(a, b evidence.RunSummary) *decision {
	x, y := a.Envelope, b.Envelope
	var drift []string
	for _, f := range []struct{ name, a, b string }{
		{"tenant", x.Tenant, y.Tenant}, {"manifest digest", x.ManifestDigest, y.ManifestDigest}, {"mode", x.Mode, y.Mode},
		{"policy digest", x.PolicyDigest, y.PolicyDigest}, {"dataset digest", x.DatasetDigest, y.DatasetDigest},
		{"entropy sources", strings.Join(x.EntropySources, ","), strings.Join(y.EntropySources, ",")},
		{"replay tolerance", x.ReplayTolerance, y.ReplayTolerance}, {"provider", x.Provider, y.Provider}, {"base URL", x.BaseURL, y.BaseURL},
		{"model", x.Model, y.Model}, {"formation", x.Formation, y.Formation}, {"task profile", x.TaskProfile, y.TaskProfile},
		{"language", x.Language, y.Language}, {"case", x.Case, y.Case}, {"task", x.Task, y.Task},
	} {
		if f.name == "case" && (f.a == "" || f.b == "") {
			continue // a run recorded before schema v6 has no case; its manifest digest names it
		}
		if f.name == "task" && (f.a == "" || f.b == "") {
			continue // a run recorded before schema v7 names no task
		}
		if f.a != f.b {
			drift = append(drift, fmt.Sprintf("%s %s and %s", f.name, labelEmpty(f.a), labelEmpty(f.b)))
		}
	}
	if len(drift) == 0 {
		return nil
	}
	return &decision{Refused, fmt.Sprintf("runs %s and %s were not recorded under the same envelope: %s", a.RunID, b.RunID, strings.Join(drift, "; "))}
}

// exchangeItems are a run's provider exchanges by member, in order, as compared documents:
// {"time", "request", "reply", "payload": {"status", "attempts", "latency_ms"}}.
func exchangeItems(ctx context.Context, store *evidence.Store, rec *recording) (map[string][]item, error) {
	requests := map[int64][]byte{}
	for _, x := range rec.exchanges {
		requests[x.Order] = x.Request
	}
	out := map[string][]item{}
	for _, ev := range rec.events {
		if ev.Type != event.TypeProviderExchange {
			continue
		}
		p, err := event.Decode[event.ProviderExchange](ev.Type, ev.Payload)
		if err != nil {
			return nil, fmt.Errorf("run %s event %d: %w", rec.run.RunID, ev.Seq, err)
		}
		doc := map[string]any{"time": ev.Time.UTC().Format(evidence.EventTimeLayout),
			"payload": map[string]any{"status": jsonNumber(p.Status), "attempts": jsonNumber(p.Attempts), "latency_ms": jsonFloat(p.LatencyMS)}}
		if v, err := jsondiff.Decode(requests[ev.Seq]); err == nil {
			doc["request"] = v
		}
		if p.MessageArtifact != "" {
			b, err := artifact(ctx, store, p.MessageArtifact)
			if err != nil {
				return nil, fmt.Errorf("run %s event %d: the parsed reply: %w", rec.run.RunID, ev.Seq, err)
			}
			if v, err := jsondiff.Decode(b); err == nil {
				doc["reply"] = v
			}
		}
		seq := p.Seq
		out[ev.MemberID] = append(out[ev.MemberID], item{typ: ev.Type, member: ev.MemberID, session: ev.SessionID, seq: ev.Seq, doc: doc, reqSeq: &seq})
	}
	for _, items := range out {
		slices.SortStableFunc(items, func(x, y item) int { return *x.reqSeq - *y.reqSeq })
	}
	return out, nil
}

func jsonNumber(n int) any { v, _ := jsondiff.Decode([]byte(fmt.Sprint(n))); return v }

func jsonFloat(f float64) any {
	v, err := jsondiff.Decode(jsondiff.Raw(f, true))
	if err != nil {
		return nil
	}
	return v
}
