package audit

import (
	"bytes"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/owenrumney/go-sarif/v3/pkg/report/v210/sarif"

	"github.com/assay-audit/assay/metrics"
)

// SARIFOptions say who produced the log.
type SARIFOptions struct {
	// ToolVersion is assay's version, recorded as the driver's version.
	ToolVersion string
	// InformationURI is where the rules are documented; docs/audit.md's address when "".
	InformationURI string
}

const defaultInformationURI = "https://github.com/assay-audit/assay/blob/main/docs/audit.md"

// level is the SARIF level (§3.58.6) a severity maps to: critical is error, high is warning.
func level(s Severity) string {
	if s == Critical {
		return sarif.LevelError
	}
	return sarif.LevelWarning
}

// metricRuleID is the reportingDescriptor id of a metric threshold.
func metricRuleID(metric string) string { return "metric/" + metric }

// SARIF renders res as a SARIF 2.1.0 log (OASIS standard, sarif-schema-2.1.0.json), UTF-8 JSON
// indented by two spaces with no HTML escaping: one run whose driver is "assay" at
// opts.ToolVersion, one reportingDescriptor per evaluated rule (id, name, short and full
// description, help, default level from its severity, and its status and reason in properties),
// one per metric of a threshold, and one result per finding. An evidence finding is located by a
// logical location naming the run (kind "resource", fully qualified "<store>#<run id>") and a
// physical location naming the store file; a metric finding by file and line region. Rules that
// are not assessable are also listed as tool notifications of the invocation, so that a consumer
// that shows only results still sees that they were not passed.
func SARIF(res Result, opts SARIFOptions) ([]byte, error) {
	info := opts.InformationURI
	if info == "" {
		info = defaultInformationURI
	}
	run := sarif.NewRunWithInformationURI("assay", info)
	version := opts.ToolVersion
	if version == "" {
		version = "unknown"
	}
	run.Tool.Driver.WithVersion(version).WithFullName("assay audit")
	byID := map[string]*Rule{}
	for _, r := range Registry() {
		byID[r.ID] = r
	}
	inv := sarif.NewInvocation().WithExecutionSuccessful(true)
	for _, rr := range res.Rules {
		r := byID[rr.ID]
		props := sarif.NewPropertyBag().Add("status", string(rr.Status)).Add("severity", string(rr.Severity)).Add("evaluated", rr.Evaluated)
		if rr.Reason != "" {
			props.Add("reason", rr.Reason)
		}
		props.Add("hazard", r.Hazard).Add("procedure", r.Procedure)
		props.AddTag("risk-register").AddTag(string(rr.Severity))
		run.Tool.Driver.AddRule(sarif.NewReportingDescriptor().WithID(rr.ID).WithName(pascal(rr.Title)).
			WithShortDescription(sarif.NewMultiformatMessageString().WithText(rr.Title)).
			WithFullDescription(sarif.NewMultiformatMessageString().WithText("RISKS.md " + rr.ID + ": " + r.Hazard)).
			WithHelp(sarif.NewMultiformatMessageString().WithText(r.Doc)).
			WithHelpURI(info + "#" + strings.ToLower(rr.ID)).
			WithDefaultConfiguration(sarif.NewReportingConfiguration().WithLevel(level(rr.Severity))).
			WithProperties(props))
		if rr.Status == StatusNotAssessable {
			inv.AddToolExecutionNotification(sarif.NewNotification().WithLevel(sarif.LevelNote).
				WithMessage(sarif.NewTextMessage(fmt.Sprintf("%s not assessable: %s", rr.ID, rr.Reason))).
				WithDescriptor(sarif.NewReportingDescriptorReference().WithID(rr.ID)))
		}
	}
	seen := map[string]bool{}
	for _, t := range res.Thresholds {
		if seen[t.Metric] {
			continue
		}
		seen[t.Metric] = true
		d, ok := metrics.Lookup(t.Metric)
		if !ok {
			return nil, fmt.Errorf("%w: %q", ErrBadThreshold, t.Metric)
		}
		props := sarif.NewPropertyBag().Add("method", d.Method.String()).Add("scope", string(d.Scope)).Add("source", d.Source)
		props.AddTag("metric")
		run.Tool.Driver.AddRule(sarif.NewReportingDescriptor().WithID(metricRuleID(t.Metric)).WithName(pascal(d.Title)).
			WithShortDescription(sarif.NewMultiformatMessageString().WithText(d.Title + " over a threshold")).
			WithFullDescription(sarif.NewMultiformatMessageString().WithText(d.Doc)).
			WithHelp(sarif.NewMultiformatMessageString().WithText("Threshold set with --fail-on; `assay metrics explain " + t.Metric + "` gives the definition and its limits.")).
			WithDefaultConfiguration(sarif.NewReportingConfiguration().WithLevel(sarif.LevelError)).
			WithProperties(props))
	}
	run.AddInvocation(inv)
	storeURI := fileURI(res.Store)
	for _, rr := range res.Rules {
		for _, f := range rr.Findings {
			result := run.CreateResultForRule(rr.ID).WithLevel(level(f.Severity)).WithMessage(sarif.NewTextMessage(f.Message))
			loc := sarif.NewLocation()
			if storeURI != "" {
				loc.WithPhysicalLocation(sarif.NewPhysicalLocation().WithArtifactLocation(sarif.NewArtifactLocation().WithURI(storeURI)))
			}
			name := f.RunID
			if name == "" {
				name = "(store)"
			}
			loc.AddLogicalLocation(sarif.NewLogicalLocation().WithName(name).WithKind("resource").WithFullyQualifiedName(res.Store + "#" + name))
			result.AddLocation(loc)
			props := sarif.NewPropertyBag().Add("run_id", f.RunID).Add("severity", string(f.Severity)).Add("procedure", f.Procedure).Add("evidence", f.Evidence)
			result.WithProperties(props)
		}
	}
	for _, m := range res.Exceeded {
		region := sarif.NewRegion()
		if m.StartLine > 0 {
			region.WithStartLine(m.StartLine)
			if m.EndLine >= m.StartLine {
				region.WithEndLine(m.EndLine)
			}
		}
		phys := sarif.NewPhysicalLocation().WithArtifactLocation(sarif.NewArtifactLocation().WithURI(fileURI(m.File)))
		if m.StartLine > 0 {
			phys.WithRegion(region)
		}
		loc := sarif.NewLocation().WithPhysicalLocation(phys).
			AddLogicalLocation(sarif.NewLogicalLocation().WithFullyQualifiedName(m.Subject).WithKind(logicalKind(m.Scope)))
		props := sarif.NewPropertyBag().Add("metric", m.Metric).Add("value", m.Value).Add("threshold", m.Threshold).
			Add("kind", m.Kind).Add("method", m.Method).Add("coverage", m.Coverage).Add("snapshot_id", m.SnapshotID).
			Add("build_context", m.BuildContext).Add("origin", m.Origin).Add("variant", m.Variant)
		run.CreateResultForRule(metricRuleID(m.Metric)).WithLevel(sarif.LevelError).
			WithMessage(sarif.NewTextMessage(fmt.Sprintf("%s %s is %s, over the threshold %s (%s, %s)", m.Subject, m.Metric, formatValue(m.Value), m.Threshold, m.Kind, m.Method))).
			AddLocation(loc).WithProperties(props)
	}
	rep := sarif.NewReport()
	rep.AddRun(run)
	var b bytes.Buffer
	if err := rep.PrettyWrite(&b); err != nil {
		return nil, fmt.Errorf("audit: write SARIF: %w", err)
	}
	return append(unescapeHTML(b.Bytes()), '\n'), nil
}

// logicalKind is the SARIF logicalLocation kind (§3.33.7) of a metric scope.
func logicalKind(scope string) string {
	switch scope {
	case string(metrics.ScopePackage):
		return "namespace"
	case string(metrics.ScopeType):
		return "type"
	}
	return "function"
}

// fileURI writes a path as a URI reference (relative paths stay relative; spaces and other
// reserved characters are escaped).
func fileURI(path string) string {
	if path == "" {
		return ""
	}
	return (&url.URL{Path: filepath.ToSlash(path)}).String()
}

func formatValue(v float64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.4f", v), "0"), ".")
}

// pascal turns a title into a SARIF rule name (§3.49.7: an identifier-like name), e.g.
// "Authority drift on resume" -> "AuthorityDriftOnResume".
func pascal(title string) string {
	var b strings.Builder
	for _, w := range strings.FieldsFunc(title, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	}) {
		b.WriteString(strings.ToUpper(w[:1]) + w[1:])
	}
	return b.String()
}

// unescapeHTML undoes encoding/json's HTML escaping (\u003c, \u003e, \u0026) in b, which the
// SARIF library's marshaller applies: only where the backslash starts an escape (preceded by an
// even number of backslashes), so a literal backslash followed by "u003e" stays as it was.
func unescapeHTML(b []byte) []byte {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] == '\\' && i+5 < len(b) {
			switch string(b[i : i+6]) {
			case `\u003c`, `\u003e`, `\u0026`:
				out = append(out, map[string]byte{`\u003c`: '<', `\u003e`: '>', `\u0026`: '&'}[string(b[i:i+6])])
				i += 5
				continue
			}
			out = append(out, b[i], b[i+1]) // an escape: copy it whole so its second char is not read as a start
			i++
			continue
		}
		out = append(out, b[i])
	}
	return out
}
