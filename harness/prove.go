package harness

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"

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
	// observed lists "member/file" paths whose bytes the harness could not re-derive from the asked
	// arguments (recordedWrites), so the boundary's observation was taken.
	observed []string
	// unaccounted lists what a member's directory holds that no recorded succeeded call produced
	// with those bytes and the harness did not scaffold: an effect on the member's files nobody
	// asked for (or one placed from outside).
	unaccounted []string
}

// proveDeliverables reads every implementing member's declared files, stores their bytes as
// artifacts, compares each file's SHA-256 with the member's last recorded succeeded write of that
// path (the boundary's observation, or the content of a write_file reconciled as succeeded), and
// copies the members whose files are all proven into verified-<run>/<member> under the case
// directory. An error is one that stops the case (an artifact the store refused).
func proveDeliverables(ctx context.Context, s *caseState) (*proof, error) {
	p := &proof{digests: map[string]string{}, artifacts: map[string]string{}, verified: map[string]string{}}
	recs, err := s.journal, s.journalErr
	if err != nil {
		p.err = err
		return p, nil
	}
	if s.traceErr != nil {
		p.err = fmt.Errorf("trace unavailable: %w", s.traceErr)
		return p, nil
	}
	p.unasked = unaskedCalls(s.trace, recs)
	written, observed, conflicts := recordedWrites(recs)
	p.observed, p.unproven = observed, append(p.unproven, conflicts...)
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
				p.unproven = append(p.unproven, fmt.Sprintf("%s (sha256 %.12s, the member's asked calls re-derive to %.12s)",
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
		if !readsFromAnother(s.entry, pl.Spec.ID) { // a reader's directory is its writer's, walked as the writer's
			p.unaccounted = append(p.unaccounted, unaccountedFiles(pl, s.language, s.goModule, written)...)
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

// readsFromAnother reports whether member works in another member's directory (CatalogEntry's
// ReadsFrom: a critic reading the generator's files).
func readsFromAnother(e CatalogEntry, member string) bool {
	for _, t := range e.Members {
		if t.ID == member {
			return t.ReadsFrom != ""
		}
	}
	return false
}

// unaccountedFiles walks a member's directory and lists, as "member/path (why)", every entry that is
// neither a directory, nor a regular file whose bytes are those the member's recorded succeeded
// calls re-derive to for that path (written, from recordedWrites), nor the go.mod the harness
// scaffolds for an implementing Go member, byte for byte. A member acts on its directory only
// through its recorded tool calls; anything else there is an effect no call accounts for.
func unaccountedFiles(pl memberPlan, language, goModule string, written map[string]string) []string {
	dir := pl.Spec.Dir
	if dir == "" {
		return nil
	}
	var out []string
	err := filepath.WalkDir(dir, func(file string, d fs.DirEntry, err error) error {
		if err != nil {
			out = append(out, fmt.Sprintf("%s/%s (unreadable: %v)", pl.Spec.ID, file, err))
			return nil
		}
		rel, rerr := filepath.Rel(dir, file)
		if rerr != nil || rel == "." || d.IsDir() {
			return nil
		}
		id := pl.Spec.ID + "/" + filepath.ToSlash(rel)
		if !d.Type().IsRegular() {
			out = append(out, id+" (not a regular file)")
			return nil
		}
		data, rerr := os.ReadFile(file)
		if rerr != nil {
			out = append(out, fmt.Sprintf("%s (unreadable: %v)", id, rerr))
			return nil
		}
		sum := sha256.Sum256(data)
		want, ok := written[id]
		switch {
		case ok && want == hex.EncodeToString(sum[:]):
		case !ok && rel == "go.mod" && language == reference.LanguageGo && string(data) == goModule:
		case !ok && worktreeScaffold(pl, filepath.ToSlash(rel), data):
		case ok:
			out = append(out, fmt.Sprintf("%s (sha256 %.12s, the recorded calls re-derive to %.12s)", id, hex.EncodeToString(sum[:]), labelOr(want, "no file")))
		default:
			out = append(out, id+" (no recorded call produced it)")
		}
		return nil
	})
	if err != nil {
		out = append(out, fmt.Sprintf("%s (its directory cannot be read: %v)", pl.Spec.ID, err))
	}
	return out
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
		files["go.mod"] = []byte(s.goModule)
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

// recordedWrites returns, for "member/path", the SHA-256 hex of the bytes the member's succeeded
// calls touching that path must have left there ("" when none), re-derived from the calls' asked
// arguments in journal order (every run of the team run: lineageToolRecords), not from the
// runtime's observation of what landed: a write_file leaves exactly its content; an edit_file
// leaves the harness's own application of its operations (editText) to the bytes the earlier
// calls left. Only where the harness cannot re-derive the bytes (an edit of a file no recorded
// write produced, or a tool such as shell whose effect on files is opaque) is the boundary's
// observation (Outcome.Files) taken, and such a path is listed in observed. A succeeded edit whose
// operations do not apply to the re-derived bytes maps to "" with the reason in conflicts: the
// runtime says it succeeded at something that cannot have happened. The asked arguments are the
// intents' (unaskedCalls holds each intent to the raw response that asked for it). A simulated
// (dry_run) call wrote nothing.
func recordedWrites(recs []tool.Record) (sums map[string]string, observed, conflicts []string) {
	intents := map[string]tool.Intent{}
	sums = map[string]string{}
	bytesOf := map[string]*string{} // re-derived content; nil when only observed
	set := func(id string, text *string, sum string) {
		bytesOf[id] = text
		if text != nil {
			d := sha256.Sum256([]byte(*text))
			sum = hex.EncodeToString(d[:])
		}
		sums[id] = sum
	}
	for _, r := range recs {
		if r.Intent != nil {
			intents[r.Intent.IdempotencyKey] = *r.Intent
			continue
		}
		o := r.Outcome
		if o.State != tool.StateSucceeded || o.Simulated {
			continue
		}
		in, ok := intents[o.IdempotencyKey]
		var a struct {
			Path       string        `json:"path"`
			Content    *string       `json:"content"`
			Operations []tool.EditOp `json:"operations"`
		}
		parsed := ok && json.Unmarshal(in.Arguments, &a) == nil && a.Path != ""
		id := o.MemberID + "/" + path.Clean(a.Path)
		switch {
		case parsed && in.Tool == "write_file" && a.Content != nil:
			set(id, a.Content, "")
			continue
		case parsed && in.Tool == "edit_file":
			if prior := bytesOf[id]; prior != nil {
				text, err := editText(*prior, a.Operations)
				if err != nil {
					conflicts = append(conflicts, fmt.Sprintf("%s (call %s succeeded, but its operations do not apply to the bytes the earlier calls left: %v)", id, in.CallID, err))
					set(id, nil, "")
					continue
				}
				set(id, &text, "")
				continue
			}
		}
		// Not re-derivable: take the observation, and say so.
		for p, sum := range o.Files {
			oid := o.MemberID + "/" + p
			set(oid, nil, sum)
			observed = append(observed, oid)
		}
	}
	sort.Strings(observed)
	return sums, slices.Compact(observed), conflicts
}

// editText applies edit_file's operations to text as the tool's documented contract says
// (runtime/tool's edit_file Doc: replace Old with New, Old occurring exactly Count times, default
// 1; insert Text before or after an Anchor occurring exactly once; delete an Old occurring exactly
// once; append or prepend Text), all or nothing. It is the harness's own reading of that contract,
// so a runtime that applies edits otherwise is contradicted by the file on disk.
func editText(text string, ops []tool.EditOp) (string, error) {
	once := func(what, s string) (int, error) {
		if n := strings.Count(text, s); s == "" || n != 1 {
			return 0, fmt.Errorf("%s %q occurs %d times, want exactly 1", what, s, n)
		}
		return strings.Index(text, s), nil
	}
	for i, op := range ops {
		switch op.Op {
		case "replace":
			want := max(op.Count, 1)
			if n := strings.Count(text, op.Old); op.Old == "" || n != want {
				return "", fmt.Errorf("operation %d: old text occurs %d times, want %d", i+1, n, want)
			}
			text = strings.ReplaceAll(text, op.Old, op.New)
		case "insert_before", "insert_after":
			at, err := once("anchor", op.Anchor)
			if err != nil {
				return "", fmt.Errorf("operation %d: %w", i+1, err)
			}
			if op.Op == "insert_after" {
				at += len(op.Anchor)
			}
			text = text[:at] + op.Text + text[at:]
		case "delete":
			at, err := once("old text", op.Old)
			if err != nil {
				return "", fmt.Errorf("operation %d: %w", i+1, err)
			}
			text = text[:at] + text[at+len(op.Old):]
		case "append":
			text += op.Text
		case "prepend":
			text = op.Text + text
		default:
			return "", fmt.Errorf("operation %d: unknown op %q", i+1, op.Op)
		}
	}
	return text, nil
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
