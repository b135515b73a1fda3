package audit

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// Entropy sources a trace can show (docs/replay.md): the clock stamps every event; session ids and
// idempotency keys derive from the run id; members' replies come from the provider.
const (
	entropyClock    = "wall_clock"
	entropyRunID    = "run_id"
	entropyProvider = "provider_responses"
)

func ruleR06() *Rule {
	return &Rule{
		ID: "R06", Title: "Nondeterminism from an undeclared entropy source", Severity: High,
		Hazard: "entropy or environment influence omitted",
		Doc: "For every run in the selection with events, derives from its trace the entropy sources it shows — " +
			"wall_clock (its events carry clock times), provider_responses (it holds provider_exchange events), run_id (a " +
			"session id or idempotency key of its events contains the id of a run of its lineage) — and requires its " +
			"envelope to declare each. For every replay whose own verdict is within_tolerance or mismatch " +
			"(nondeterminism observed), requires the replayed run's envelope to declare at least one entropy source. " +
			"A source shown or observed but not declared is a finding.",
		Procedure: "events (time, type provider_exchange, session_id, payload idempotency_key) vs envelopes.entropy_sources; events replay_verdict",
		Check: func(ctx context.Context, in *Input) (Outcome, error) {
			out := Outcome{Subject: "runs with events"}
			for _, r := range in.Runs() {
				evs, err := in.Events(ctx, r.RunID)
				if err != nil {
					return Outcome{}, err
				}
				if len(evs) == 0 {
					continue
				}
				out.Evaluated++
				ids := []string{r.RunID}
				if len(evs) > 0 && evs[0].Type == "replay_started" {
					ids = append(ids, str(payload(evs[0]), "replays_run_id"))
				} else if chain, err := lineage(ctx, in, r.RunID); err == nil {
					ids = chain
				} else {
					return Outcome{}, err
				}
				shown := map[string]int64{entropyClock: evs[0].Seq}
				for _, ev := range evs {
					if _, ok := shown[entropyProvider]; !ok && ev.Type == "provider_exchange" {
						shown[entropyProvider] = ev.Seq
					}
					if _, ok := shown[entropyRunID]; !ok {
						key := str(payload(ev), "idempotency_key")
						for _, id := range ids {
							if id != "" && (strings.Contains(ev.SessionID, id) || strings.Contains(key, id)) {
								shown[entropyRunID] = ev.Seq
								break
							}
						}
					}
				}
				for _, src := range []string{entropyClock, entropyProvider, entropyRunID} {
					seq, ok := shown[src]
					if !ok || slices.Contains(r.Envelope.EntropySources, src) {
						continue
					}
					out.Findings = append(out.Findings, Finding{RunID: r.RunID,
						Message: fmt.Sprintf("run %s's trace shows entropy source %s (first at event %d), which its envelope does not declare (declared: [%s])",
							r.RunID, src, seq, strings.Join(r.Envelope.EntropySources, ", ")),
						Evidence: []Row{{RunID: r.RunID, Table: "events", Seq: seq, Key: src},
							{RunID: r.RunID, Table: "envelopes", Key: "entropy_sources", Value: strings.Join(r.Envelope.EntropySources, ","), Digest: r.EnvelopeDigest}}})
				}
			}
			cs, err := continuations(ctx, in)
			if err != nil {
				return Outcome{}, err
			}
			for _, c := range cs {
				if !c.replay || c.of == nil || (c.verdict != "within_tolerance" && c.verdict != "mismatch") || len(c.of.Envelope.EntropySources) > 0 {
					continue
				}
				out.Findings = append(out.Findings, Finding{RunID: c.ofID,
					Message: fmt.Sprintf("replay %s of run %s observed nondeterminism (%s), but run %s declares no entropy source", c.run.RunID, c.ofID, c.verdict, c.ofID),
					Evidence: []Row{{RunID: c.run.RunID, Table: "events", Key: "replay_verdict", Value: c.verdict},
						{RunID: c.ofID, Table: "envelopes", Key: "entropy_sources", Digest: c.of.EnvelopeDigest}}})
			}
			return out, nil
		},
	}
}

// effectState is one effect (an idempotency key) as the audit folds its journal.
type effectState struct {
	key, tool  string
	intentRun  string
	intentSeq  int64
	dispatched bool
	state      string // last outcome state; "" when none
	outcomeRun string
	outcomeSeq int64
}

// terminal effect states: once reached, only unknown may still move (to succeeded or failed, through
// reconciliation or an operator's decision).
func terminalState(s string) bool {
	return s == "succeeded" || s == "failed" || s == "cancelled" || s == "unknown"
}

func ruleR10() *Rule {
	return &Rule{
		ID: "R10", Title: "External effect without a durable intent, or left unknown", Severity: Critical,
		Hazard: "an external effect occurs across a checkpoint gap",
		Doc: "For every effect family of the selection (a run, the runs that resume it through run_resumed and the runs " +
			"that correct it through corrects_run_id, e.g. a reconciliation's correction run, in creation order; replay " +
			"runs re-serve recorded outcomes and are left out), folds the effect journal itself, in order: each tool_call " +
			"event is an intent, each tool_result an outcome, by idempotency key. An outcome (or a receipt) for a key with " +
			"no earlier intent, a dispatched intent with no outcome by the end of the lineage (the process stopped between " +
			"the two: the effect may have committed), an effect whose last state is unknown (unreconciled), and a terminal " +
			"outcome replaced by another other than unknown resolved by reconciliation or an operator, are findings. The " +
			"runtime's own effect checks are not read.",
		Procedure: "events tool_call/tool_result folded by payload idempotency_key over each family (run_resumed, corrects_run_id), in creation order",
		Check: func(ctx context.Context, in *Input) (Outcome, error) {
			out := Outcome{Subject: "effects"}
			families, err := effectFamilies(ctx, in)
			if err != nil {
				return Outcome{}, err
			}
			for _, chain := range families {
				effs, findings, err := foldEffects(ctx, in, chain)
				if err != nil {
					return Outcome{}, err
				}
				out.Evaluated += len(effs)
				out.Findings = append(out.Findings, findings...)
			}
			return out, nil
		},
	}
}

// effectFamilies groups the store's non-replay runs into effect families — a run, the runs that
// resume it (run_resumed's resumes_run_id) and the runs that correct it (corrects_run_id: an
// operator's reconciliation records its outcome in a correction run) — and returns, in creation
// order, each family holding a selected non-replay run, its runs in creation order. The journal of
// a family is one: an intent in the first run, its unknown outcome, the reconciliation in a
// correction run and the resume's receipt read together (harness.Effects folds the same family).
func effectFamilies(ctx context.Context, in *Input) ([][]string, error) {
	parent := map[string]string{}
	var find func(string) string
	find = func(id string) string {
		for parent[id] != "" && parent[id] != id {
			id = parent[id]
		}
		return id
	}
	union := func(a, b string) {
		if in.Run(b) == nil {
			return // a link to a run the store lacks: R01/R12 speak to it
		}
		ra, rb := find(a), find(b)
		if ra != rb {
			parent[ra] = rb
		}
	}
	replay := map[string]bool{}
	for _, r := range in.runs {
		isReplay, err := in.IsReplay(ctx, r.RunID)
		if err != nil {
			return nil, err
		}
		if isReplay {
			replay[r.RunID] = true
			continue
		}
		parent[r.RunID] = r.RunID
	}
	for _, r := range in.runs {
		if replay[r.RunID] {
			continue
		}
		if r.CorrectsRunID != "" && !replay[r.CorrectsRunID] {
			union(r.RunID, r.CorrectsRunID)
		}
		evs, err := in.Events(ctx, r.RunID)
		if err != nil {
			return nil, err
		}
		for _, ev := range evs {
			if ev.Type == "run_resumed" {
				if to := str(payload(ev), "resumes_run_id"); to != "" && !replay[to] {
					union(r.RunID, to)
				}
			}
		}
	}
	selected := map[string]bool{}
	for _, id := range in.sel {
		if !replay[id] {
			selected[find(id)] = true
		}
	}
	byRoot := map[string][]string{}
	var roots []string
	for _, r := range in.runs { // creation order
		if replay[r.RunID] {
			continue
		}
		root := find(r.RunID)
		if !selected[root] {
			continue
		}
		if _, ok := byRoot[root]; !ok {
			roots = append(roots, root)
		}
		byRoot[root] = append(byRoot[root], r.RunID)
	}
	out := make([][]string, 0, len(roots))
	for _, root := range roots {
		out = append(out, byRoot[root])
	}
	return out, nil
}

// foldEffects folds the journal of the runs of chain, oldest first, and returns the effects and the
// findings on them.
func foldEffects(ctx context.Context, in *Input, chain []string) ([]*effectState, []Finding, error) {
	byKey := map[string]*effectState{}
	var order []*effectState
	var findings []Finding
	last := chain[len(chain)-1]
	for _, id := range chain {
		evs, err := in.Events(ctx, id)
		if err != nil {
			return nil, nil, err
		}
		for _, ev := range evs {
			if ev.Type != "tool_call" && ev.Type != "tool_result" {
				continue
			}
			p := payload(ev)
			key := str(p, "idempotency_key")
			e := byKey[key]
			if ev.Type == "tool_call" {
				if e == nil {
					e = &effectState{key: key, tool: str(p, "tool"), intentRun: id, intentSeq: ev.Seq}
					byKey[key] = e
					order = append(order, e)
				}
				if d, _ := p["dispatched"].(bool); d {
					e.dispatched = true
				}
				continue
			}
			state := str(p, "state")
			if e == nil {
				what := "an outcome"
				if p["receipt"] != nil {
					what = "a receipt"
				}
				findings = append(findings, Finding{RunID: id,
					Message:  fmt.Sprintf("run %s event %d records %s (%s) for idempotency key %s, which no earlier tool_call intent names", id, ev.Seq, what, state, key),
					Evidence: []Row{{RunID: id, Table: "events", Seq: ev.Seq, Key: key, Value: state}}})
				continue
			}
			source := str(p, "source")
			if terminalState(e.state) && state != e.state && !(e.state == "unknown" && (source == "reconciliation" || source == "operator")) {
				findings = append(findings, Finding{RunID: id,
					Message: fmt.Sprintf("effect %s (%s) ended %s at run %s event %d, then run %s event %d records %s (source %s): a terminal outcome changed",
						key, e.tool, e.state, e.outcomeRun, e.outcomeSeq, id, ev.Seq, state, source),
					Evidence: []Row{{RunID: e.outcomeRun, Table: "events", Seq: e.outcomeSeq, Key: key, Value: e.state},
						{RunID: id, Table: "events", Seq: ev.Seq, Key: key, Value: state}}})
				continue
			}
			e.state, e.outcomeRun, e.outcomeSeq = state, id, ev.Seq
		}
	}
	for _, e := range order {
		switch {
		case e.dispatched && e.state == "":
			findings = append(findings, Finding{RunID: last,
				Message:  fmt.Sprintf("effect %s (%s) was dispatched (intent at run %s event %d) and has no outcome: it may have committed", e.key, e.tool, e.intentRun, e.intentSeq),
				Evidence: []Row{{RunID: e.intentRun, Table: "events", Seq: e.intentSeq, Key: e.key}}})
		case e.state == "unknown":
			findings = append(findings, Finding{RunID: last,
				Message:  fmt.Sprintf("effect %s (%s) is unknown (run %s event %d) and was never reconciled: it may have committed", e.key, e.tool, e.outcomeRun, e.outcomeSeq),
				Evidence: []Row{{RunID: e.outcomeRun, Table: "events", Seq: e.outcomeSeq, Key: e.key, Value: e.state}}})
		}
	}
	return order, findings, nil
}

func ruleR13() *Rule {
	return &Rule{
		ID: "R13", Title: "An API description mistaken for a working capability", Severity: High,
		Hazard: "an HTTP schema mistaken for a working run or replay capability",
		Doc: "Not assessable from evidence: the store records runs that executed, not which HTTP endpoints a deployment " +
			"advertises or what a client got back from them. Decide it by exercising the integration (a client that gets " +
			"501 after schema validation passed), never from the presence of an API description. Never passed.",
		Procedure: "none: outside the evidence",
		Check: func(ctx context.Context, in *Input) (Outcome, error) {
			return Outcome{NotAssessable: "the evidence store records executed runs, not the HTTP capabilities a deployment advertises: test the integration's behaviour"}, nil
		},
	}
}

func ruleR14() *Rule {
	return &Rule{
		ID: "R14", Title: "Isolation inferred from in-process contracts", Severity: Critical,
		Hazard: "tenant or secret isolation inferred from in-process contracts",
		Doc: "Not assessable from evidence: a tenant recorded in an envelope and tools rooted per member are in-process " +
			"contracts; whether the host keeps tenants' files, rows, tools and credentials apart is enforced (or not) by " +
			"OS, database, network and secret boundaries the store cannot observe. Never passed.",
		Procedure: "none: outside the evidence",
		Check: func(ctx context.Context, in *Input) (Outcome, error) {
			return Outcome{NotAssessable: "host isolation (OS, database, network, secret boundaries) is outside what the evidence records: audit the deployment"}, nil
		},
	}
}
