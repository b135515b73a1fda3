package harness

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// datedSnapshot matches a model id's dated-snapshot suffix: -YYYY-MM-DD (OpenAI) or -YYYYMMDD.
var datedSnapshot = regexp.MustCompile(`^-(\d{4}-\d{2}-\d{2}|\d{8})$`)

// answeredBy reports whether answered may answer for requested: the same id, a dated snapshot of
// it (gpt-4o-mini-2024-07-18 for gpt-4o-mini), or an alias the operator declared. how says which.
func answeredBy(requested, answered string, aliases map[string]string) (ok bool, how string) {
	switch {
	case answered == requested:
		return true, ""
	case strings.HasPrefix(answered, requested) && datedSnapshot.MatchString(answered[len(requested):]):
		return true, fmt.Sprintf("%s (a dated snapshot of %s)", answered, requested)
	case aliases[requested] == answered && answered != "":
		return true, fmt.Sprintf("%s (declared alias of %s)", answered, requested)
	}
	return false, ""
}

var routing = Check{
	Name: "routing",
	Doc: "every request of this team run went to the chat-completions path asking for the configured model, and every " +
		"response names a model that may answer for it (the same id, a dated snapshot of it, or a declared --model-alias), " +
		"read both from the gateway's record of the relayed bytes and from the recorded response bytes; a response naming no " +
		"model leaves routing unknown",
	Required: true,
	run: func(ctx context.Context, s *caseState) (string, string, any) {
		records, err := teamRecords(ctx, s.gateway, s.team.RunID)
		if err != nil {
			return statusUnknown, "gateway records unavailable: " + err.Error(), nil
		}
		if s.traceErr != nil {
			return statusUnknown, "trace unavailable: " + s.traceErr.Error(), nil
		}
		if len(records) == 0 {
			return statusFailed, "the gateway saw no request for this run", nil
		}
		var problems, unknown []string
		answers := map[string]bool{}
		other := 0
		for _, r := range records {
			if r.Model != s.model || !strings.HasSuffix(r.Path, "/chat/completions") {
				problems = append(problems, fmt.Sprintf("request %d (%s): asked for model %q on path %s", r.ID, r.SessionID, r.Model, r.Path))
			}
			if r.Status != 200 {
				other++
				continue
			}
			if r.AnsweredModel == "" {
				unknown = append(unknown, fmt.Sprintf("request %d (%s): the response named no model", r.ID, r.SessionID))
				continue
			}
			if ok, how := answeredBy(s.model, r.AnsweredModel, s.modelAliases); !ok {
				problems = append(problems, fmt.Sprintf("request %d (%s): asked for %q, answered by %q (gateway record)", r.ID, r.SessionID, s.model, r.AnsweredModel))
			} else if how != "" {
				answers[how] = true
			}
		}
		for _, member := range slices.Sorted(mapKeys(s.trace.turns)) {
			for _, mt := range s.trace.turns[member] {
				for _, x := range mt.Exchanges {
					if x.ReplyErr != nil || x.P.Status != 200 {
						continue
					}
					if x.Reply.Model == "" {
						unknown = append(unknown, fmt.Sprintf("%s request %d: the recorded response names no model (%s)", member, x.P.Seq, x.where()))
					} else if ok, _ := answeredBy(s.model, x.Reply.Model, s.modelAliases); !ok {
						problems = append(problems, fmt.Sprintf("%s request %d: asked for %q, the recorded response names %q (%s)", member, x.P.Seq, s.model, x.Reply.Model, x.where()))
					}
				}
			}
		}
		switch {
		case len(problems) > 0:
			return statusFailed, strings.Join(problems, "; "), nil
		case len(unknown) > 0:
			return statusUnknown, "the model that answered is not known: " + strings.Join(unknown, "; "), nil
		}
		detail := fmt.Sprintf("%d requests to %s, answered by %s", len(records), s.model, s.model)
		if len(answers) > 0 {
			detail = fmt.Sprintf("%d requests to %s, answered by %s", len(records), s.model, strings.Join(slices.Sorted(mapKeys(answers)), ", "))
		}
		if other > 0 {
			detail += fmt.Sprintf(" (%d answered with a status other than 200)", other)
		}
		return statusPassed, detail, nil
	},
}
