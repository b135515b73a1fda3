package attest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/gowebpki/jcs"
	intoto "github.com/in-toto/attestation/go/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/assay-audit/assay/evidence"
)

// signed is one attestation read from a file: the statement it signs, or why
// it is not a valid one.
type signed struct {
	file, line string
	runID      string
	statement  *intoto.Statement
	problem    string // "" when the signature and statement are valid
}

// directory is every attestation in a directory, by the run its statement
// names, plus those that name none (unreadable, not signed by the key).
type directory struct {
	byRun   map[string][]signed
	orphans []signed
}

// ErrNoAttestations: the attestations directory to check against is missing or is not a
// directory (bad input: nothing was checked).
var ErrNoAttestations = errors.New("no attestations directory")

// readDir reads every "*.intoto.jsonl" file of dir and checks each line's
// signature with v. It returns an error wrapping fs.ErrNotExist when dir is
// missing.
func readDir(ctx context.Context, dir string, v *Verifier) (*directory, error) {
	d := &directory{byRun: map[string][]signed{}}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return d, fmt.Errorf("%w: %s: %w", ErrNoAttestations, dir, err)
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), FileSuffix) || !e.Type().IsRegular() {
			continue
		}
		path := filepath.Join(dir, e.Name())
		f, err := os.Open(path)
		if err != nil {
			return d, fmt.Errorf("attest: %w", err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 64<<20)
		n := 0
		for sc.Scan() {
			n++
			raw := bytes.TrimSpace(sc.Bytes())
			if len(raw) == 0 {
				continue
			}
			a := signed{file: path, line: fmt.Sprintf("%s:%d", path, n)}
			if v == nil {
				a.problem = "no public key to check its signature"
				d.orphans = append(d.orphans, a)
				continue
			}
			payload, err := v.open(ctx, raw, PayloadTypeInToto)
			if err != nil {
				a.problem = err.Error()
				d.orphans = append(d.orphans, a)
				continue
			}
			st := &intoto.Statement{}
			if err := protojson.Unmarshal(payload, st); err != nil {
				a.problem = "the signed payload is not an in-toto statement: " + err.Error()
				d.orphans = append(d.orphans, a)
				continue
			}
			if err := st.Validate(); err != nil {
				a.problem = "the signed statement is not valid: " + err.Error()
				d.orphans = append(d.orphans, a)
				continue
			}
			if st.GetType() != intoto.StatementTypeUri || st.GetPredicateType() != PredicateType {
				a.problem = fmt.Sprintf("statement type %q, predicate %q: not an assay run attestation", st.GetType(), st.GetPredicateType())
				d.orphans = append(d.orphans, a)
				continue
			}
			name := st.GetSubject()[0].GetName()
			if !strings.HasPrefix(name, SubjectRunPrefix) {
				a.problem = fmt.Sprintf("its first subject %q names no run", name)
				d.orphans = append(d.orphans, a)
				continue
			}
			a.runID, a.statement = strings.TrimPrefix(name, SubjectRunPrefix), st
			d.byRun[a.runID] = append(d.byRun[a.runID], a)
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			return d, fmt.Errorf("attest: read %s: %w", path, err)
		}
	}
	return d, nil
}

// compare returns "" when every attestation of prior signs a statement equal
// to want, else what differs.
func compare(prior []signed, want *intoto.Statement) string {
	for _, a := range prior {
		if d := diffStatements(a.statement, want); d != "" {
			return fmt.Sprintf("%s: %s", a.line, d)
		}
	}
	return ""
}

// diffStatements names the parts of got that differ from want: subjects (the
// terminal hash, artifacts) and each top-level predicate field.
func diffStatements(got, want *intoto.Statement) string {
	var diffs []string
	gs, ws := got.GetSubject(), want.GetSubject()
	if len(gs) == 0 || len(ws) == 0 || gs[0].GetDigest()["sha256"] != ws[0].GetDigest()["sha256"] {
		g := ""
		if len(gs) > 0 {
			g = gs[0].GetDigest()["sha256"]
		}
		diffs = append(diffs, fmt.Sprintf("terminal hash: signed %s, now %s", g, ws[0].GetDigest()["sha256"]))
	}
	subj := func(xs []*intoto.ResourceDescriptor) map[string]string {
		m := map[string]string{}
		for _, x := range xs[min(1, len(xs)):] {
			m[x.GetName()] = x.GetDigest()["sha256"] + " " + x.GetMediaType()
		}
		return m
	}
	for _, n := range changedKeys(subj(gs), subj(ws)) {
		diffs = append(diffs, "artifact "+n)
	}
	for _, k := range changedKeys(fields(got.GetPredicate()), fields(want.GetPredicate())) {
		diffs = append(diffs, "predicate "+k)
	}
	return strings.Join(diffs, ", ")
}

// changedKeys returns, sorted, the keys whose values differ between a and b
// or that only one of them has.
func changedKeys(a, b map[string]string) []string {
	var keys []string
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			keys = append(keys, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}

// fields returns each top-level field of a predicate as canonical JSON (RFC 8785).
func fields(p *structpb.Struct) map[string]string {
	out := map[string]string{}
	for k, v := range p.GetFields() {
		raw, err := protojson.Marshal(v)
		if err != nil {
			out[k] = "unencodable"
			continue
		}
		canon, err := jcs.Transform(raw)
		if err != nil {
			out[k] = string(raw)
			continue
		}
		out[k] = string(canon)
	}
	return out
}

// Check checks the attestations in dir against the store: every run of
// results that is finalized or sealed needs one whose signature verifies
// with v and whose statement equals the one the store yields now. It returns
// the results with Attestation set on each such run — verified, missing
// (nobody signed it: it may have been added by someone without the key),
// invalid (a signature or statement that does not hold; Status becomes
// tampered) or differs (validly signed, but the evidence changed since:
// Status becomes tampered) — plus, when all is set (results cover every run),
// a tampered entry for each signed run the store lacks (unknown_run) and for
// each line of an attestation file that is not a valid attestation by v's
// key.
//
// Errors: dir missing or unreadable (wrapping fs.ErrNotExist when missing);
// database errors.
func Check(ctx context.Context, src runSource, v *Verifier, dir string, results []evidence.RunVerification, all bool) ([]evidence.RunVerification, error) {
	d, err := readDir(ctx, dir, v)
	if err != nil {
		return nil, err
	}
	c, err := loadCatalog(ctx, src)
	if err != nil {
		return nil, err
	}
	out := make([]evidence.RunVerification, 0, len(results))
	seen := map[string]bool{}
	for _, res := range results {
		if res.RunID == "" {
			out = append(out, res)
			continue
		}
		seen[res.RunID] = true
		r, ok := c.byID[res.RunID]
		prior := d.byRun[res.RunID]
		switch {
		case !ok && len(prior) > 0:
			res.Attestation = evidence.AttestationDiffers
			res.Detail = fmt.Sprintf("signed in %s, but the run's row is gone from the store; %s", prior[0].line, res.Detail)
		case !ok || r.TerminalHash == "":
			if len(prior) > 0 {
				res.Attestation, res.Status = evidence.AttestationDiffers, evidence.VerifyTampered
				res.Detail = fmt.Sprintf("signed as finalized in %s, but the run is %s now: a status change on a finalized run; %s", prior[0].line, r.Status, res.Detail)
			}
		case len(prior) == 0:
			res.Attestation = evidence.AttestationMissing
			res.Detail = fmt.Sprintf("no attestation in %s signs this run (a run added by someone without the key has none); %s", dir, res.Detail)
		default:
			want, err := c.statement(r)
			if err != nil {
				res.Attestation = evidence.AttestationDiffers
				res.Detail = fmt.Sprintf("%v; %s", err, res.Detail)
			} else if diff := compare(prior, want); diff != "" {
				res.Attestation, res.Status = evidence.AttestationDiffers, evidence.VerifyTampered
				res.Detail = fmt.Sprintf("validly signed, but the evidence changed since: %s; %s", diff, res.Detail)
			} else {
				res.Attestation = evidence.AttestationVerified
			}
		}
		out = append(out, res)
	}
	if all {
		var ids []string
		for id := range d.byRun {
			if !seen[id] {
				ids = append(ids, id)
			}
		}
		sort.Strings(ids)
		for _, id := range ids {
			out = append(out, evidence.RunVerification{RunID: id, Status: evidence.VerifyTampered, Attestation: evidence.AttestationUnknownRun,
				Detail: fmt.Sprintf("%s signs run %s, which the store lacks: the run was deleted", d.byRun[id][0].line, id)})
		}
		for _, a := range d.orphans {
			out = append(out, evidence.RunVerification{Status: evidence.VerifyTampered, Table: "attestations", Row: a.line,
				Attestation: evidence.AttestationInvalid, Detail: fmt.Sprintf("%s is not a valid attestation: %s", a.line, a.problem)})
		}
	}
	return out, nil
}
