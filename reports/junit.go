package reports

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"
	"time"
)

// JUnit writes r as JUnit XML in the Apache Ant schema Jenkins reads (reports/testdata/JUnit.xsd):
// a <testsuites> root with one <testsuite> per invocation (per group, "assay AXIS KEY", when r is
// grouped: r.GroupBy) and one <testcase> per case (name: the case name and its matrix axes,
// "sequential [provider=ref-a model=ref-model-a task=double repeat=2]", repeat=- for a run that is
// not a repeat; classname: assay.<formation>.<language>.<profile>; time: wall seconds). That schema
// allows one result element per testcase, so a case that is not accepted gets one <failure> (type
// rejected or non_certifiable) whose message names every required check that did not pass and whose
// text gives each one's status and full detail; an interrupted or unfinalized case gets an <error>
// with the reason. Suite properties record the provider, model, reference flag and, per case, its
// run id and terminal hash, and per run ("run RUN_ID provider", ... model, task, task_file_sha256
// (full), task_file (whether the stored task file matches), repeat, invocation_id) its axes. A case without a wall time (not finalized) has time 0: the schema
// requires one, and the case is an error.
func JUnit(w io.Writer, r Report) error {
	doc := junitSuites{}
	suites := make([]junitSuite, 0, len(r.Invocations))
	if r.GroupBy != "" {
		suites = groupSuites(r)
	} else {
		for i, inv := range r.Invocations {
			suites = append(suites, suiteOf(i, inv))
		}
	}
	for _, suite := range suites {
		suite.Properties = append(suite.Properties, junitProperty{Name: "verified", Value: fmt.Sprint(r.Verified)})
		if !r.Verified {
			suite.SystemOut = "verdicts as recorded, NOT verified (--no-verify)\n" + suite.SystemOut
		}
		doc.Suites = append(doc.Suites, suite)
	}
	if len(r.StoreFindings) > 0 {
		// The store itself does not verify (a deleted run, a broken store-wide chain): one failing
		// testcase, whatever the cases say.
		doc.Suites = append(doc.Suites, junitSuite{Name: "assay evidence store", Package: "assay", ID: len(doc.Suites),
			Timestamp: r.GeneratedAt.UTC().Format("2006-01-02T15:04:05"), Hostname: "not-recorded", Tests: 1, Failures: 1, Time: "0",
			Properties: []junitProperty{{Name: "store", Value: r.StorePath}},
			Cases: []junitCase{{Name: "evidence store", Classname: "assay.store", Time: "0", Failure: &junitOutcome{
				Type: "store_does_not_verify", Message: fmt.Sprintf("the evidence store does not verify: %d findings", len(r.StoreFindings)),
				Text: strings.Join(r.StoreFindings, "\n")}}}})
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return fmt.Errorf("reports: junit: %w", err)
	}
	_, err := io.WriteString(w, "\n")
	return err
}

type junitSuites struct {
	XMLName xml.Name     `xml:"testsuites"`
	Suites  []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name       string          `xml:"name,attr"`
	Package    string          `xml:"package,attr"`
	ID         int             `xml:"id,attr"`
	Timestamp  string          `xml:"timestamp,attr"`
	Hostname   string          `xml:"hostname,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Errors     int             `xml:"errors,attr"`
	Skipped    int             `xml:"skipped,attr"`
	Time       string          `xml:"time,attr"`
	Properties []junitProperty `xml:"properties>property"`
	Cases      []junitCase     `xml:"testcase"`
	SystemOut  string          `xml:"system-out"`
	SystemErr  string          `xml:"system-err"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitOutcome `xml:"failure,omitempty"`
	Error     *junitOutcome `xml:"error,omitempty"`
}

type junitOutcome struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

func suiteOf(i int, inv Invocation) junitSuite {
	name := inv.ID
	if name == "" {
		name = "runs without a recorded invocation"
	}
	s := junitSuite{Name: "assay " + name, Package: "assay", ID: i, Timestamp: inv.StartedAt.UTC().Format("2006-01-02T15:04:05"),
		Hostname: "not-recorded", Time: "0"}
	if inv.WallSeconds != nil {
		s.Time = fmt.Sprintf("%.3f", *inv.WallSeconds)
	}
	s.prop("invocation_id", orNone(inv.ID))
	for _, p := range inv.Providers {
		s.prop("provider", p.Name)
		s.prop("model", p.Model)
	}
	s.prop("reference", fmt.Sprint(inv.Reference))
	if inv.Reference {
		s.prop("note", "reference results: the embedded reference provider is not a language model")
	}
	for _, e := range inv.Environments {
		s.prop("environment_fingerprint", e.Fingerprint)
	}
	s.addCases(inv.Cases)
	return s
}

// groupSuites are one suite per group of r (r.GroupBy), named "assay AXIS KEY", holding the
// group's cases in report order; a suite's time is the sum of its cases' wall times.
func groupSuites(r Report) []junitSuite {
	byRun := map[string]Case{}
	var started time.Time
	for _, inv := range r.Invocations {
		for _, c := range inv.Cases {
			byRun[c.RunID] = c
		}
		if started.IsZero() || inv.StartedAt.Before(started) {
			started = inv.StartedAt
		}
	}
	if started.IsZero() {
		started = r.GeneratedAt
	}
	suites := make([]junitSuite, 0, len(r.Groups))
	for i, g := range r.Groups {
		s := junitSuite{Name: fmt.Sprintf("assay %s %s", r.GroupBy, g.Key), Package: "assay", ID: i,
			Timestamp: started.UTC().Format("2006-01-02T15:04:05"), Hostname: "not-recorded",
			Time: fmt.Sprintf("%.3f", g.Totals.WallSeconds)}
		s.prop("group_by", r.GroupBy)
		s.prop("group", g.Key)
		var cases []Case
		reference := false
		for _, id := range g.RunIDs {
			if c, ok := byRun[id]; ok {
				cases = append(cases, c)
				reference = reference || c.Reference
			}
		}
		s.prop("reference", fmt.Sprint(reference))
		if reference {
			s.prop("note", "reference results: the embedded reference provider is not a language model")
		}
		s.addCases(cases)
		suites = append(suites, s)
	}
	return suites
}

func (s *junitSuite) prop(k, v string) {
	s.Properties = append(s.Properties, junitProperty{Name: k, Value: v})
}

// caseAxes are the matrix axes of a case as its testcase name carries them, so two repeats, two
// providers or two models of one case are two tests a CI server keeps apart.
func caseAxes(c Case) string {
	rep := "-"
	if c.Repeat > 0 {
		rep = fmt.Sprint(c.Repeat)
	}
	return fmt.Sprintf("[provider=%s model=%s task=%s repeat=%s]", tokenText(orNotRecorded(c.Provider)), tokenText(orNotRecorded(c.Model)),
		tokenText(orNotRecorded(c.Task)), rep)
}

// tokenText makes s an xs:token's content: no tabs or line breaks, no leading, trailing or
// doubled spaces.
func tokenText(s string) string { return strings.Join(strings.Fields(s), " ") }

// addCases adds a testcase per case, with its properties (run id, terminal hash, provider, model,
// task, the task file's full SHA-256 and status, repeat), keyed by run id.
func (s *junitSuite) addCases(cases []Case) {
	s.Tests += len(cases)
	var out strings.Builder
	for _, c := range cases {
		s.prop(c.Name+" run_id", c.RunID)
		s.prop(c.Name+" terminal_hash", orNone(c.TerminalHash))
		run := "run " + c.RunID + " "
		s.prop(run+"provider", orNotRecorded(c.Provider))
		s.prop(run+"model", orNotRecorded(c.Model))
		s.prop(run+"task", orNotRecorded(c.Task))
		s.prop(run+"task_file_sha256", orNone(c.TaskFile.SHA256))
		s.prop(run+"task_file", taskFileStatusText(c.TaskFile.Status))
		s.prop(run+"repeat", groupKeyOfRepeat(c.Repeat))
		s.prop(run+"invocation_id", orNone(c.InvocationID))
		jc := junitCase{Name: tokenText(c.Name + " " + caseAxes(c)),
			Classname: fmt.Sprintf("assay.%s.%s.%s", orNone(c.Formation), orNone(c.Language), orNone(c.Profile)), Time: "0"}
		if c.WallSeconds != nil {
			jc.Time = fmt.Sprintf("%.3f", *c.WallSeconds)
		}
		switch {
		case c.VerificationFailed():
			jc.Failure = &junitOutcome{Type: DoesNotVerify, Message: fmt.Sprintf("run %s: evidence does not verify (%s); recorded verdict %s",
				c.RunID, c.Verification, orNone(c.Verdict)), Text: c.VerificationDetail}
			s.Failures++
		case c.Interrupted || c.Verdict == "":
			why := "not finalized"
			if c.Interrupted {
				why = "interrupted: its writer ended before finalizing it"
			}
			jc.Error = &junitOutcome{Type: orNone(c.Status), Message: fmt.Sprintf("run %s %s", c.RunID, why),
				Text: strings.Join(c.Reasons, "\n")}
			s.Errors++
		case c.Verdict != "accepted":
			jc.Failure = failureOf(c)
			s.Failures++
		}
		fmt.Fprintf(&out, "%s %s: %s (run %s)\n", c.Name, caseAxes(c), verdictWord(c), c.RunID)
		s.Cases = append(s.Cases, jc)
	}
	s.SystemOut += out.String()
}

// failureOf names every required check of c that did not pass, with its full detail.
func failureOf(c Case) *junitOutcome {
	var names []string
	var text strings.Builder
	for _, ch := range c.Checks {
		if !ch.Required || ch.Status == "passed" {
			continue
		}
		names = append(names, ch.Name)
		fmt.Fprintf(&text, "check %s: %s: %s\n", ch.Name, ch.Status, ch.Detail)
	}
	for _, r := range c.Reasons {
		fmt.Fprintf(&text, "reason: %s\n", r)
	}
	msg := fmt.Sprintf("%s: %s", c.Verdict, strings.Join(c.Reasons, "; "))
	if len(names) > 0 {
		msg = fmt.Sprintf("%s: checks not passed: %s", c.Verdict, strings.Join(names, ", "))
	}
	return &junitOutcome{Type: c.Verdict, Message: msg, Text: text.String()}
}
