package harness

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"

	"github.com/gowebpki/jcs"

	"github.com/assay-audit/assay/runtime/provider/reference"
	"github.com/assay-audit/assay/runtime/tool"
)

// proof is what proving a case's deliverables established, before any check runs: for each
// implementing member, which of its declared files exist with the bytes its last recorded
// succeeded write produced, their stored artifact digests, and a directory holding a copy of the
// proven files alone. The files, tests and oracle checks read it; none of them writes it, so the
// order of the checks cannot change a verdict.
type proof struct {
	// err is set when the run's tool journal could not be read: nothing is proven.
	err error
	// missing, unproven and secret list "member/file" with why, for the files check.
	missing, unproven, secret []string
	// digests maps "member/file" to the SHA-256 of the stored artifact of its bytes (masked bytes
	// for a file holding a credential).
	digests map[string]string
	// artifacts maps member id to the digest of its oracle artifact's stored bytes.
	artifacts map[string]string
	// verified maps member id to the directory holding a copy of its proven deliverables alone
	// (only members whose every deliverable is proven).
	verified map[string]string
	// unasked lists recorded tool calls that no recorded response asked for, or whose recorded
	// payload is not the arguments the response carried: the runtime acted on its own.
	unasked []string
}

// proveDeliverables reads every implementing member's declared files, stores their bytes as
// artifacts, compares each file's SHA-256 with the member's last recorded succeeded write of that
// path (the boundary's observation, or the content of a write_file reconciled as succeeded), and
// copies the members whose files are all proven into verified-<run>/<member> under the case
// directory. An error is one that stops the case (an artifact the store refused).
func proveDeliverables(ctx context.Context, s *caseState) (*proof, error) {
	p := &proof{digests: map[string]string{}, artifacts: map[string]string{}, verified: map[string]string{}}
	recs, err := lineageToolRecords(ctx, s)
	if err != nil {
		p.err = err
		return p, nil
	}
	if s.traceErr != nil {
		p.err = fmt.Errorf("trace unavailable: %w", s.traceErr)
		return p, nil
	}
	p.unasked = unaskedCalls(s.trace, recs)
	written := recordedWrites(recs)
	for _, pl := range s.plans {
		proven := map[string][]byte{}
		for _, f := range pl.Deliverables {
			id := pl.Spec.ID + "/" + f
			file := filepath.Join(pl.Spec.Dir, f)
			fi, err := os.Lstat(file)
			if err != nil || !fi.Mode().IsRegular() || fi.Size() == 0 {
				p.missing = append(p.missing, id)
				continue
			}
			data, err := os.ReadFile(file)
			if err != nil {
				p.missing = append(p.missing, id)
				continue
			}
			clean := true
			if masked := s.redactor.String(string(data)); masked != string(data) {
				// A credential never enters the store; the masked bytes are not the artifact the
				// oracle checks, so the case cannot be accepted on them.
				p.secret = append(p.secret, id)
				data = []byte(masked)
				clean = false
			}
			sum := sha256.Sum256(data)
			if want, ok := written[id]; !ok {
				p.unproven = append(p.unproven, id+" (no recorded write produced it)")
				clean = false
			} else if want != hex.EncodeToString(sum[:]) {
				p.unproven = append(p.unproven, fmt.Sprintf("%s (sha256 %.12s, the member's last recorded write produced %.12s)",
					id, hex.EncodeToString(sum[:]), labelOr(want, "no file")))
				clean = false
			}
			if clean {
				proven[f] = data
			}
			d, err := s.store.PutArtifact(ctx, s.runID, "deliverable/"+id, "text/plain", data)
			if err != nil {
				return nil, fmt.Errorf("store artifact %s: %w", id, err)
			}
			p.digests[id] = d
			if f == pl.Artifact {
				p.artifacts[pl.Spec.ID] = d
			}
		}
		if len(pl.Deliverables) > 0 && len(proven) == len(pl.Deliverables) {
			dir, err := s.verifiedCopy(pl.Spec.ID, proven)
			if err != nil {
				return nil, fmt.Errorf("%s: copy the proven deliverables: %w", pl.Spec.ID, err)
			}
			p.verified[pl.Spec.ID] = dir
		}
	}
	return p, nil
}

// verifiedCopy writes a member's proven deliverables, and for Go the module file the harness
// scaffolds, into a fresh directory of its own under the case directory
// (verified-<run>/<member>), and returns it: what the tests and the oracle run on.
func (s *caseState) verifiedCopy(member string, files map[string][]byte) (string, error) {
	dir := filepath.Join(s.caseDir, "verified-"+s.runID, member)
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	if s.language == reference.LanguageGo {
		files["go.mod"] = []byte(goModule)
	}
	for name, data := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// recordedWrites returns, for "member/path", the SHA-256 hex of the file the member's last
// succeeded call touching that path left ("" when it left none), from the team run's tool journal
// (every run of the team run: lineageToolRecords). The observation is the boundary's
// (Outcome.Files); a write_file whose success was established by reconciliation has none, and its
// intent's content is what it wrote. A simulated (dry_run) write wrote nothing.
func recordedWrites(recs []tool.Record) map[string]string {
	intents := map[string]tool.Intent{}
	out := map[string]string{}
	for _, r := range recs {
		if r.Intent != nil {
			intents[r.Intent.IdempotencyKey] = *r.Intent
			continue
		}
		o := r.Outcome
		if o.State != tool.StateSucceeded || o.Simulated {
			continue
		}
		for p, sum := range o.Files {
			out[o.MemberID+"/"+p] = sum
		}
		in, ok := intents[o.IdempotencyKey]
		if len(o.Files) == 0 && ok && in.Tool == "write_file" && (o.Source == "reconciliation" || o.Source == "operator") {
			var a struct {
				Path    string `json:"path"`
				Content string `json:"content"`
			}
			if json.Unmarshal(in.Arguments, &a) == nil && a.Path != "" {
				sum := sha256.Sum256([]byte(a.Content))
				out[o.MemberID+"/"+path.Clean(a.Path)] = hex.EncodeToString(sum[:])
			}
		}
	}
	return out
}

// wireCallID is the runtime's call id of a tool call a response carried: "r<request seq>-<the
// tool call's id>" (runtime/member.go).
func wireCallID(seq int, toolCallID string) string { return fmt.Sprintf("r%d-%s", seq, toolCallID) }

// unaskedCalls compares every recorded tool-call intent with the tool calls the recorded responses
// carried (the harness's parse of the response artifacts): an intent no response asked for, or
// whose payload SHA-256 is not that of the RFC 8785 canonical arguments the response carried, is
// listed. The payload hash is taken before redaction, so a masked secret does not hide a change.
func unaskedCalls(t *caseTrace, recs []tool.Record) []string {
	asked := map[string]string{} // member + " " + call id -> SHA-256 of the canonical arguments, "" when not JSON
	for member, ts := range t.turns {
		for _, mt := range ts {
			for _, x := range mt.Exchanges {
				if x.ReplyErr != nil {
					continue
				}
				for _, tc := range x.Reply.ToolCalls {
					sum := ""
					if c, err := jcs.Transform([]byte(tc.Arguments)); err == nil {
						d := sha256.Sum256(c)
						sum = hex.EncodeToString(d[:])
					}
					asked[member+" "+wireCallID(x.P.Seq, tc.ID)] = sum
				}
			}
		}
	}
	var out []string
	seen := map[string]bool{}
	for _, r := range recs {
		in := r.Intent
		if in == nil || seen[in.IdempotencyKey] {
			continue
		}
		seen[in.IdempotencyKey] = true
		sum, ok := asked[in.MemberID+" "+in.CallID]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("%s call %s (%s): no recorded response asked for it", in.MemberID, in.CallID, in.Tool))
		case sum != in.PayloadSHA256:
			out = append(out, fmt.Sprintf("%s call %s (%s): the runtime recorded payload %s, the response's arguments hash to %s",
				in.MemberID, in.CallID, in.Tool, in.PayloadSHA256, labelOr(sum, "nothing (not JSON)")))
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}
