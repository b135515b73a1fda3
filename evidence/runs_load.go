package evidence

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
)

// Runs returns every run with its envelope, verdict, checks, usage and
// artifact links, ordered by creation. Works on a read-only store.
func (s *Store) Runs(ctx context.Context) ([]RunSummary, error) {
	if err := s.beginRead(); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	runs, err := loadRuns(ctx, s.conn, "")
	if err != nil {
		return nil, err
	}
	s.markInterrupted(runs)
	return runs, nil
}

// Run returns one run like Runs does. Errors: ErrNoRun when it does not exist.
func (s *Store) Run(ctx context.Context, runID string) (RunSummary, error) {
	if err := s.beginRead(); err != nil {
		return RunSummary{}, err
	}
	defer s.mu.Unlock()
	runs, err := loadRuns(ctx, s.conn, runID)
	if err != nil {
		return RunSummary{}, err
	}
	if len(runs) == 0 {
		return RunSummary{}, fmt.Errorf("evidence: run %s: %w", runID, ErrNoRun)
	}
	s.markInterrupted(runs)
	return runs[0], nil
}

// loadRuns loads the runs matching runID ("" = all) with everything linked to them.
func loadRuns(ctx context.Context, q queryer, runID string) ([]RunSummary, error) {
	rows, err := q.QueryContext(ctx, `SELECT r.run_id, r.corrects_run_id, r.status, r.envelope_digest, r.created_at,
			r.finalized_at, r.event_count, r.terminal_hash, coalesce(r.terminal_version, 0),
			coalesce(ev.n, 0),
			e.tenant, e.manifest_digest, e.mode, e.policy_digest, e.dataset_digest, e.environment_fingerprint,
			e.entropy_sources, e.replay_tolerance, e.provider, e.base_url, e.model, e.formation, e.task_profile, e.language,
			coalesce(e.case_name, ''), coalesce(e.invocation_id, ''), coalesce(e.task_name, ''), coalesce(e.repeat_index, 0),
			coalesce(a.hash, ''), coalesce(r.writer_id, 0)
		FROM runs r LEFT JOIN envelopes e ON e.run_id = r.run_id
			LEFT JOIN (SELECT run_id, count(*) AS n FROM events WHERE $1 = '' OR run_id = $1 GROUP BY run_id) ev ON ev.run_id = r.run_id
			LEFT JOIN (SELECT run_id, min(hash) AS hash FROM admissions WHERE $1 = '' OR run_id = $1 GROUP BY run_id) a ON a.run_id = r.run_id
		WHERE $1 = '' OR r.run_id = $1
		ORDER BY r.ordinal`, runID)
	if err != nil {
		return nil, fmt.Errorf("evidence: load runs: %w", err)
	}
	defer rows.Close()
	var out []RunSummary
	index := map[string]int{}
	for rows.Next() {
		var r RunSummary
		var corrects, terminal sql.NullString
		var finalized sql.NullTime
		var storedCount sql.NullInt64
		var liveCount int64
		var tenant, manifest, mode, policy, dataset, fingerprint, tolerance, provider, baseURL, model, formation, profile, language sql.NullString
		var sources any
		if err := rows.Scan(&r.RunID, &corrects, &r.Status, &r.EnvelopeDigest, &r.CreatedAt, &finalized, &storedCount,
			&terminal, &r.TerminalVersion, &liveCount, &tenant, &manifest, &mode, &policy, &dataset, &fingerprint, &sources, &tolerance,
			&provider, &baseURL, &model, &formation, &profile, &language, &r.Envelope.Case, &r.Envelope.InvocationID, &r.Envelope.Task, &r.Envelope.Repeat, &r.AdmissionHash, &r.WriterID); err != nil {
			return nil, fmt.Errorf("evidence: load runs: %w", err)
		}
		r.CorrectsRunID = corrects.String
		r.TerminalHash = terminal.String
		r.EventCount = liveCount
		if storedCount.Valid {
			r.EventCount = storedCount.Int64
		}
		if finalized.Valid {
			t := finalized.Time.UTC()
			r.FinalizedAt = &t
		}
		r.CreatedAt = r.CreatedAt.UTC()
		r.Envelope = Envelope{Case: r.Envelope.Case, InvocationID: r.Envelope.InvocationID, Task: r.Envelope.Task, Repeat: r.Envelope.Repeat,
			Tenant: tenant.String, ManifestDigest: manifest.String, Mode: mode.String, PolicyDigest: policy.String,
			DatasetDigest: dataset.String, EnvironmentFingerprint: fingerprint.String, ReplayTolerance: tolerance.String,
			Provider: provider.String, BaseURL: baseURL.String, Model: model.String, Formation: formation.String,
			TaskProfile: profile.String, Language: language.String,
		}
		if r.Envelope.EntropySources, err = toStrings(sources); err != nil {
			return nil, fmt.Errorf("evidence: run %s: entropy_sources: %w", r.RunID, err)
		}
		index[r.RunID] = len(out)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("evidence: load runs: %w", err)
	}
	rows.Close()
	if len(out) == 0 {
		return out, nil
	}
	if err := loadVerdicts(ctx, q, runID, out, index); err != nil {
		return nil, err
	}
	if err := loadChecksInto(ctx, q, runID, out, index); err != nil {
		return nil, err
	}
	if err := loadUsageInto(ctx, q, runID, out, index); err != nil {
		return nil, err
	}
	if err := loadUsageVerdictsInto(ctx, q, runID, out, index); err != nil {
		return nil, err
	}
	if err := loadArtifactLinksInto(ctx, q, runID, out, index); err != nil {
		return nil, err
	}
	calls, err := loadUsageCalls(ctx, q, runID)
	if err != nil {
		return nil, err
	}
	cps, err := loadCheckpointInfos(ctx, q, runID)
	if err != nil {
		return nil, err
	}
	changes, err := loadStatusChanges(ctx, q, runID)
	if err != nil {
		return nil, err
	}
	for id, i := range index {
		out[i].UsageCalls, out[i].Checkpoints, out[i].StatusChanges = calls[id], cps[id], changes[id]
	}
	return out, nil
}

// loadStatusChanges returns the status changes of runID ("" = all runs) by run id.
func loadStatusChanges(ctx context.Context, q queryer, runID string) (map[string][]StatusChange, error) {
	rows, err := q.QueryContext(ctx, `SELECT run_id, from_status, to_status, reason, writer_id, changed_at
		FROM run_status_changes WHERE ? = '' OR run_id = ? ORDER BY run_id, ordinal`, runID, runID)
	if err != nil {
		return nil, fmt.Errorf("evidence: load status changes: %w", err)
	}
	defer rows.Close()
	out := map[string][]StatusChange{}
	for rows.Next() {
		var id string
		var c StatusChange
		if err := rows.Scan(&id, &c.From, &c.To, &c.Reason, &c.WriterID, &c.At); err != nil {
			return nil, fmt.Errorf("evidence: load status changes: %w", err)
		}
		c.At = c.At.UTC()
		out[id] = append(out[id], c)
	}
	return out, rows.Err()
}

func loadVerdicts(ctx context.Context, q queryer, runID string, out []RunSummary, index map[string]int) error {
	rows, err := q.QueryContext(ctx, `SELECT run_id, verdict, reasons FROM verdicts WHERE ? = '' OR run_id = ?`, runID, runID)
	if err != nil {
		return fmt.Errorf("evidence: load verdicts: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var v Verdict
		var reasons any
		if err := rows.Scan(&id, &v.Verdict, &reasons); err != nil {
			return fmt.Errorf("evidence: load verdicts: %w", err)
		}
		if v.Reasons, err = toStrings(reasons); err != nil {
			return fmt.Errorf("evidence: run %s: verdict reasons: %w", id, err)
		}
		if i, ok := index[id]; ok {
			out[i].Verdict = &v
		}
	}
	return rows.Err()
}

func loadChecksInto(ctx context.Context, q queryer, runID string, out []RunSummary, index map[string]int) error {
	checks, err := loadChecks(ctx, q, runID)
	if err != nil {
		return err
	}
	for id, cs := range checks {
		if i, ok := index[id]; ok {
			out[i].Checks = cs
		}
	}
	return nil
}

// loadChecks returns the checks of runID ("" = all runs) by run id, each list ordered by name.
func loadChecks(ctx context.Context, q queryer, runID string) (map[string][]Check, error) {
	rows, err := q.QueryContext(ctx, `SELECT run_id, name, required, status, detail, CAST(evidence AS VARCHAR)
		FROM checks WHERE ? = '' OR run_id = ? ORDER BY run_id, name`, runID, runID)
	if err != nil {
		return nil, fmt.Errorf("evidence: load checks: %w", err)
	}
	defer rows.Close()
	out := map[string][]Check{}
	for rows.Next() {
		var id string
		var c Check
		var ev sql.NullString
		if err := rows.Scan(&id, &c.Name, &c.Required, &c.Status, &c.Detail, &ev); err != nil {
			return nil, fmt.Errorf("evidence: load checks: %w", err)
		}
		if ev.Valid {
			c.Evidence = json.RawMessage(ev.String)
		}
		out[id] = append(out[id], c)
	}
	return out, rows.Err()
}

func loadUsageInto(ctx context.Context, q queryer, runID string, out []RunSummary, index map[string]int) error {
	usage, err := loadUsage(ctx, q, runID)
	if err != nil {
		return err
	}
	for id, us := range usage {
		if i, ok := index[id]; ok {
			out[i].Usage = us
		}
	}
	return nil
}

// loadUsage returns the usage rows of runID ("" = all runs) by run id, in recording order.
func loadUsage(ctx context.Context, q queryer, runID string) (map[string][]UsageRow, error) {
	rows, err := q.QueryContext(ctx, `SELECT run_id, member_id, session_id, source, state, requests, prompt_tokens,
		completion_tokens, total_tokens, cached_tokens, reasoning_tokens
		FROM usage WHERE ? = '' OR run_id = ? ORDER BY run_id, ordinal`, runID, runID)
	if err != nil {
		return nil, fmt.Errorf("evidence: load usage: %w", err)
	}
	defer rows.Close()
	out := map[string][]UsageRow{}
	for rows.Next() {
		var id string
		var u UsageRow
		var requests int64
		var tokens [5]sql.NullInt64
		if err := rows.Scan(&id, &u.MemberID, &u.SessionID, &u.Source, &u.State, &requests,
			&tokens[0], &tokens[1], &tokens[2], &tokens[3], &tokens[4]); err != nil {
			return nil, fmt.Errorf("evidence: load usage: %w", err)
		}
		u.Requests = int(requests)
		ptrs := [5]**int64{&u.PromptTokens, &u.CompletionTokens, &u.TotalTokens, &u.CachedTokens, &u.ReasoningTokens}
		for i, t := range tokens {
			if t.Valid {
				v := t.Int64
				*ptrs[i] = &v
			}
		}
		out[id] = append(out[id], u)
	}
	return out, rows.Err()
}

func loadUsageVerdictsInto(ctx context.Context, q queryer, runID string, out []RunSummary, index map[string]int) error {
	verdicts, err := loadUsageVerdicts(ctx, q, runID)
	if err != nil {
		return err
	}
	for id, vs := range verdicts {
		if i, ok := index[id]; ok {
			out[i].UsageVerdicts = vs
		}
	}
	return nil
}

// loadUsageVerdicts returns the usage verdicts of runID ("" = all runs) by run id, in recording order.
func loadUsageVerdicts(ctx context.Context, q queryer, runID string) (map[string][]UsageVerdict, error) {
	rows, err := q.QueryContext(ctx, `SELECT run_id, member_id, session_id, verdict, CAST(deltas AS VARCHAR), detail,
		duplicated, coalesce(multiple, 0), CAST(sources AS VARCHAR)
		FROM usage_verdicts WHERE ? = '' OR run_id = ? ORDER BY run_id, ordinal`, runID, runID)
	if err != nil {
		return nil, fmt.Errorf("evidence: load usage verdicts: %w", err)
	}
	defer rows.Close()
	out := map[string][]UsageVerdict{}
	for rows.Next() {
		var id, deltas string
		var v UsageVerdict
		var sources sql.NullString
		if err := rows.Scan(&id, &v.MemberID, &v.SessionID, &v.Verdict, &deltas, &v.Detail, &v.Duplicated, &v.Multiple, &sources); err != nil {
			return nil, fmt.Errorf("evidence: load usage verdicts: %w", err)
		}
		if sources.Valid {
			if err := json.Unmarshal([]byte(sources.String), &v.Sources); err != nil {
				return nil, fmt.Errorf("evidence: run %s: usage verdict sources: %w", id, err)
			}
		}
		if err := json.Unmarshal([]byte(deltas), &v.Deltas); err != nil {
			return nil, fmt.Errorf("evidence: run %s: usage verdict deltas: %w", id, err)
		}
		out[id] = append(out[id], v)
	}
	return out, rows.Err()
}

func loadArtifactLinksInto(ctx context.Context, q queryer, runID string, out []RunSummary, index map[string]int) error {
	links, err := loadArtifactLinks(ctx, q, runID)
	if err != nil {
		return err
	}
	for id, ls := range links {
		if i, ok := index[id]; ok {
			out[i].Artifacts = ls
		}
	}
	return nil
}

// loadArtifactLinks returns the artifact links of runID ("" = all runs) by run
// id, ordered by name. Size and Storage are zero/"" when the artifacts row is
// missing (Verify reports that as missing_payload).
func loadArtifactLinks(ctx context.Context, q queryer, runID string) (map[string][]ArtifactLink, error) {
	rows, err := q.QueryContext(ctx, `SELECT l.run_id, l.name, l.digest, l.media_type, l.linked_at, a.size, a.storage
		FROM run_artifacts l LEFT JOIN artifacts a ON a.digest = l.digest
		WHERE ? = '' OR l.run_id = ? ORDER BY l.run_id, l.name`, runID, runID)
	if err != nil {
		return nil, fmt.Errorf("evidence: load artifact links: %w", err)
	}
	defer rows.Close()
	out := map[string][]ArtifactLink{}
	for rows.Next() {
		var id string
		var l ArtifactLink
		var size sql.NullInt64
		var storage sql.NullString
		if err := rows.Scan(&id, &l.Name, &l.Digest, &l.MediaType, &l.LinkedAt, &size, &storage); err != nil {
			return nil, fmt.Errorf("evidence: load artifact links: %w", err)
		}
		l.LinkedAt = l.LinkedAt.UTC()
		l.Size, l.Storage = size.Int64, storage.String
		out[id] = append(out[id], l)
	}
	return out, rows.Err()
}

// toStrings converts a scanned DuckDB VARCHAR[] ([]any of string) to []string.
func toStrings(v any) ([]string, error) {
	if v == nil {
		return []string{}, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("expected a list, got %T", v)
	}
	out := make([]string, 0, len(list))
	for _, x := range list {
		s, ok := x.(string)
		if !ok {
			return nil, fmt.Errorf("expected a string element, got %T", x)
		}
		out = append(out, s)
	}
	return out, nil
}
