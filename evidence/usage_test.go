package evidence

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func reported(session, source string, prompt, completion, total int64) UsageRow {
	return UsageRow{MemberID: "m1", SessionID: session, Source: source, State: UsageReported, Requests: 1,
		PromptTokens: i64(prompt), CompletionTokens: i64(completion), TotalTokens: i64(total)}
}

func TestReconcileUsage(t *testing.T) {
	three := func(p, c, tot int64) []UsageRow {
		return []UsageRow{reported("s", SourceWire, p, c, tot), reported("s", SourceStore, p, c, tot), reported("s", SourceGateway, p, c, tot)}
	}
	withCached := func(rows []UsageRow, vals ...int64) []UsageRow {
		for i := range rows {
			rows[i].CachedTokens = i64(vals[i])
		}
		return rows
	}
	cases := []struct {
		name       string
		rows       []UsageRow
		want       string
		wantDeltas map[string]int64
		detail     string // substring of Detail
	}{
		{"conserved", three(100, 20, 120), UsageConserved, nil, "equal across wire, store and gateway"},
		{"zero prompt tokens on a request with messages is suspect", three(0, 0, 0), UsageVerdictUnknown, nil, "source wire is suspect_zero"},
		{"gateway missing", three(100, 20, 120)[:2], UsageVerdictUnknown, nil, "source gateway missing"},
		{"no rows for wire", three(100, 20, 120)[1:], UsageVerdictUnknown, nil, "source wire missing"},
		{"store unknown", func() []UsageRow {
			r := three(100, 20, 120)
			r[1] = UsageRow{MemberID: "m1", SessionID: "s", Source: SourceStore, State: UsageUnknown}
			return r
		}(), UsageVerdictUnknown, nil, "source store is unknown"},
		{"wire partial with equal numbers", func() []UsageRow {
			r := three(100, 20, 120)
			r[0].State = UsagePartial
			return r
		}(), UsageVerdictUnknown, nil, "source wire is partial"},
		{"reported row lacking total", func() []UsageRow {
			r := three(100, 20, 120)
			r[2].TotalTokens = nil
			return r
		}(), UsageVerdictUnknown, nil, "source gateway lacks total_tokens"},
		{"gateway doubles wire", []UsageRow{reported("s", SourceWire, 100, 20, 120), reported("s", SourceStore, 100, 20, 120), reported("s", SourceGateway, 200, 40, 240)},
			UsageMismatch, map[string]int64{"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}, "prompt_tokens: wire=100 store=100 gateway=200"},
		{"store off by one in completion", []UsageRow{reported("s", SourceWire, 100, 20, 120), reported("s", SourceStore, 100, 21, 120), reported("s", SourceGateway, 100, 20, 120)},
			UsageMismatch, map[string]int64{"completion_tokens": 1}, "completion_tokens: wire=20 store=21 gateway=20"},
		{"cached compared when all report it", withCached(three(100, 20, 120), 5, 5, 7), UsageMismatch, map[string]int64{"cached_tokens": 2}, "cached_tokens"},
		{"cached not compared when one lacks it", func() []UsageRow {
			r := withCached(three(100, 20, 120), 5, 5, 7)
			r[2].CachedTokens = nil
			return r
		}(), UsageConserved, nil, "not compared (not reported by every source): cached_tokens, reasoning_tokens"},
		{"several rows of a source are summed", []UsageRow{
			reported("s", SourceWire, 60, 10, 70), reported("s", SourceWire, 40, 10, 50),
			reported("s", SourceStore, 100, 20, 120), reported("s", SourceGateway, 100, 20, 120)}, UsageConserved, nil, ""},
		{"a partial row among several makes the source partial", []UsageRow{
			reported("s", SourceWire, 60, 10, 70), {MemberID: "m1", SessionID: "s", Source: SourceWire, State: UsagePartial, PromptTokens: i64(40)},
			reported("s", SourceStore, 100, 20, 120), reported("s", SourceGateway, 100, 20, 120)}, UsageVerdictUnknown, nil, "source wire is partial"},
		{"sources disagree on the member", func() []UsageRow {
			r := three(1, 1, 2)
			r[2].MemberID = "m2"
			return r
		}(), UsageVerdictUnknown, nil, "different members: m1, m2"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := ReconcileUsage(tc.rows)
			if len(got) != 1 {
				t.Fatalf("got %d verdicts, want 1: %+v", len(got), got)
			}
			v := got[0]
			if v.Verdict != tc.want || v.SessionID != "s" {
				t.Fatalf("verdict %+v, want %s", v, tc.want)
			}
			if diff := cmp.Diff(tc.wantDeltas, v.Deltas); diff != "" {
				t.Errorf("deltas (-want +got):\n%s", diff)
			}
			if !strings.Contains(v.Detail, tc.detail) {
				t.Errorf("detail %q lacks %q", v.Detail, tc.detail)
			}
		})
	}
}

func TestReconcileUsageSessionsAreIndependent(t *testing.T) {
	rows := []UsageRow{
		reported("b", SourceWire, 1, 1, 2), reported("b", SourceStore, 1, 1, 2), reported("b", SourceGateway, 1, 1, 2),
		reported("a", SourceWire, 1, 1, 2),
	}
	got := ReconcileUsage(rows)
	if len(got) != 2 || got[0].SessionID != "a" || got[0].Verdict != UsageVerdictUnknown || got[1].SessionID != "b" || got[1].Verdict != UsageConserved {
		t.Fatalf("ReconcileUsage = %+v", got)
	}
	if got := ReconcileUsage(nil); len(got) != 0 {
		t.Fatalf("ReconcileUsage(nil) = %+v", got)
	}
}
