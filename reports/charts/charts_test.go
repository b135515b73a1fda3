package charts

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"regexp"
	"strings"
	"testing"
)

// svgDoc is what a test reads back from a chart: every text, the accessible title, and the
// number of filled paths per fill colour (bars, cells, glyphs, legend thumbnails).
type svgDoc struct {
	root   xml.StartElement
	title  string
	texts  []string
	fills  map[string]int
	hrefs  []string
	styles []string
}

var fillRE = regexp.MustCompile(`fill:(#[0-9A-Fa-f]{6})`)

func parseSVG(t *testing.T, b []byte) svgDoc {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(b))
	doc := svgDoc{fills: map[string]int{}}
	var stack []string
	first := true
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("chart is not well-formed XML: %v\n%s", err, b)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if first {
				doc.root = tok.Copy()
				first = false
			}
			stack = append(stack, tok.Name.Local)
			for _, a := range tok.Attr {
				if a.Name.Local == "href" {
					doc.hrefs = append(doc.hrefs, a.Value)
				}
				if a.Name.Local == "style" {
					doc.styles = append(doc.styles, a.Value)
					if tok.Name.Local == "path" {
						if m := fillRE.FindStringSubmatch(a.Value); m != nil {
							doc.fills[strings.ToUpper(m[1])]++
						}
					}
				}
			}
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			if len(stack) == 0 {
				continue
			}
			switch stack[len(stack)-1] {
			case "title":
				doc.title += string(tok)
			case "text":
				doc.texts = append(doc.texts, string(tok))
			}
		}
	}
	if doc.root.Name.Local != "svg" {
		t.Fatalf("root element is %q, want svg", doc.root.Name.Local)
	}
	return doc
}

func (d svgDoc) hasText(s string) bool {
	for _, t := range d.texts {
		if strings.Contains(t, s) {
			return true
		}
	}
	return false
}

// countText counts the texts equal to s.
func (d svgDoc) countText(s string) int {
	n := 0
	for _, t := range d.texts {
		if t == s {
			n++
		}
	}
	return n
}

func (d svgDoc) attr(name string) string {
	for _, a := range d.root.Attr {
		if a.Name.Local == name {
			return a.Value
		}
	}
	return ""
}

func wantTexts(t *testing.T, d svgDoc, texts ...string) {
	t.Helper()
	for _, s := range texts {
		if !d.hasText(s) {
			t.Errorf("chart lacks text %q; texts: %q", s, d.texts)
		}
	}
}

func hex(i int) string {
	r, g, b, _ := paletteColor(i).RGBA()
	return "#" + strings.ToUpper(string([]byte{hx(r >> 12), hx(r >> 8), hx(g >> 12), hx(g >> 8), hx(b >> 12), hx(b >> 8)}))
}

func hx(v uint32) byte { return "0123456789ABCDEF"[v&0xf] }

func timeInput() []CaseTimes {
	return []CaseTimes{
		{Case: "sequential+remote/go", Phases: []PhaseSeconds{{"team", 3.5}, {"checks", 1.25}, {"finalize", 0.25}}},
		{Case: "parallel+vote/python"},
		{Case: "debate/go", Phases: []PhaseSeconds{{"team", 7}, {"checks", 2}}},
	}
}

func TestTimeByPhase(t *testing.T) {
	b, err := TimeByPhase(timeInput())
	if err != nil {
		t.Fatal(err)
	}
	d := parseSVG(t, b)
	wantTexts(t, d, "sequential+remote/go", "parallel+vote/python (no timings recorded)", "debate/go",
		"5.0 s", "9.0 s", "team", "checks", "finalize", "seconds")
	// One segment per case that ran the phase, plus the legend's swatch.
	for i, want := range []int{2 + 1, 2 + 1, 1 + 1} {
		if got := d.fills[hex(i)]; got != want {
			t.Errorf("phase %d (%s): %d filled paths, want %d", i, hex(i), got, want)
		}
	}
	if d.title != "Wall time per case by phase (seconds)" {
		t.Errorf("title = %q", d.title)
	}
}

// A phase keeps its colour (and legend place) whichever case comes first when an order is given.
func TestTimeByPhaseOrder(t *testing.T) {
	cases := []CaseTimes{{Case: "a", Phases: []PhaseSeconds{{"finalize", 1}}}, {Case: "b", Phases: []PhaseSeconds{{"team", 2}, {"finalize", 1}}}}
	b, err := TimeByPhase(cases, "team", "checks", "finalize")
	if err != nil {
		t.Fatal(err)
	}
	d := parseSVG(t, b)
	if d.fills[hex(0)] != 1+1 || d.fills[hex(2)] != 2+1 { // team: b's bar + swatch; finalize: both + swatch
		t.Errorf("team %d, finalize %d filled paths; want 2 and 3 (team first colour, finalize third)", d.fills[hex(0)], d.fills[hex(2)])
	}
}

func TestTimeByPhaseRejectsImpossibleDurations(t *testing.T) {
	for _, s := range []float64{-1, math.NaN(), math.Inf(1)} {
		_, err := TimeByPhase([]CaseTimes{{Case: "c", Phases: []PhaseSeconds{{"team", s}}}})
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%v seconds: err = %v, want ErrInvalid", s, err)
		}
	}
	_, err := TimeByPhase([]CaseTimes{{Case: "c", Phases: []PhaseSeconds{{"team", 1}, {"team", 2}}}})
	if !errors.Is(err, ErrInvalid) {
		t.Errorf("phase named twice: err = %v, want ErrInvalid", err)
	}
}

func tokensInput() []MemberTokens {
	return []MemberTokens{
		{Member: "seq/alice", Sources: []SourceTokens{{"store", 1200, true}, {"wire", 1200, true}, {Source: "gateway"}}},
		{Member: "seq/bob", Sources: []SourceTokens{{"store", 800, true}, {"wire", 810, true}, {"gateway", 800, true}}},
		{Member: "seq/carol", Sources: []SourceTokens{{"store", 0, true}, {"wire", 0, true}, {"gateway", 0, true}}},
	}
}

func TestTokensByMemberUnknownIsNotZero(t *testing.T) {
	b, err := TokensByMember(tokensInput())
	if err != nil {
		t.Fatal(err)
	}
	d := parseSVG(t, b)
	wantTexts(t, d, "seq/alice", "seq/bob", "seq/carol", "1200", "810", "800", "gateway: unknown",
		"gateway (unknown for 1 of 3 members: no bar drawn)", "store", "wire")
	// store and wire: 3 bars (carol's known zero included) + swatch; gateway: bob and carol + swatch,
	// nothing for alice's unknown.
	for i, want := range []int{4, 4, 3} {
		if got := d.fills[hex(i)]; got != want {
			t.Errorf("source %d: %d filled paths, want %d", i, got, want)
		}
	}
	n := d.countText("0")
	if n < 3 { // carol's three known zeros are labelled 0 (the axis adds one more "0")
		t.Errorf("known zero counts labelled %d times, want at least 3", n)
	}
	if strings.Count(strings.Join(d.texts, "\n"), ": unknown") != 1 {
		t.Errorf("want exactly one unknown label; texts %q", d.texts)
	}
}

func TestTokensByMemberMissingSourceIsUnknown(t *testing.T) {
	b, err := TokensByMember([]MemberTokens{
		{Member: "m1", Sources: []SourceTokens{{"store", 5, true}, {"gateway", 5, true}}},
		{Member: "m2", Sources: []SourceTokens{{"store", 7, true}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	d := parseSVG(t, b)
	wantTexts(t, d, "gateway: unknown", "gateway (unknown for 1 of 2 members")
	if _, err := TokensByMember([]MemberTokens{{Member: "m", Sources: []SourceTokens{{"store", -1, true}}}}); !errors.Is(err, ErrInvalid) {
		t.Errorf("negative count: err = %v, want ErrInvalid", err)
	}
}

var matrixChecks = []string{"files", "tests", "oracle", "members", "session_ids", "routing", "usage"}

func matrixInput() []MatrixRow {
	return []MatrixRow{
		{Case: "sequential", Statuses: map[string]Status{"files": Passed, "tests": Failed, "oracle": Skipped}},
		{Case: "debate", Statuses: map[string]Status{"files": Passed, "tests": Passed, "oracle": Passed, "members": Passed,
			"session_ids": Passed, "routing": Failed, "usage": Passed}},
	}
}

func TestCheckMatrix(t *testing.T) {
	b, err := CheckMatrix(matrixChecks, matrixInput())
	if err != nil {
		t.Fatal(err)
	}
	d := parseSVG(t, b)
	wantTexts(t, d, "sequential", "debate", "files", "session_ids", "usage",
		"passed (dot)", "failed (cross)", "skipped (ring)", "not recorded or unknown (?)")
	fill := func(st Status) string {
		r, g, b, _ := looks[st].fill.RGBA()
		return "#" + string([]byte{hx(r >> 12), hx(r >> 8), hx(g >> 12), hx(g >> 8), hx(b >> 12), hx(b >> 8)})
	}
	// cells + the legend's swatch
	for st, want := range map[Status]int{Passed: 7 + 1, Failed: 2 + 1, Skipped: 1 + 1} {
		if got := d.fills[fill(st)]; got != want {
			t.Errorf("%s: %d cells, want %d", st, got, want)
		}
	}
	q := d.countText("?")
	if q != 4+1 {
		t.Errorf("not recorded: %d '?' marks, want 5 (4 cells + legend)", q)
	}
	if _, err := CheckMatrix(matrixChecks, []MatrixRow{{Case: "c", Statuses: map[string]Status{"files": "ok"}}}); !errors.Is(err, ErrInvalid) {
		t.Errorf("unknown status: err = %v, want ErrInvalid", err)
	}
}

func mainSequenceInput() []PackagePoint {
	return []PackagePoint{
		{Package: "example.com/m/pain", Instability: 0.1, Abstractness: 0.1, Known: true},
		{Package: "example.com/m/ok", Instability: 0.9, Abstractness: 0.2, Known: true},
		{Package: "example.com/m/proxy", Instability: 0.5, Abstractness: 0.5, Known: true, Approximate: true},
		{Package: "example.com/m/useless", Instability: 0.8, Abstractness: 0.9, Known: true},
		{Package: "example.com/m/nodata"},
	}
}

func TestMainSequence(t *testing.T) {
	b, err := MainSequence(mainSequenceInput())
	if err != nil {
		t.Fatal(err)
	}
	d := parseSVG(t, b)
	wantTexts(t, d, "pain", "ok", "proxy", "useless", "Martin 1994", "1 package without instability or abstractness not drawn",
		"main sequence A + I = 1", "hollow: proxy value or incomplete coverage")
	if d.hasText("nodata") {
		t.Errorf("a package without values is labelled on the plot")
	}
	red := "#D73027"
	if got := d.fills[red]; got != 2+1 { // pain and useless, plus the legend
		t.Errorf("far-from-sequence points: %d red glyphs, want 3", got)
	}
	if _, err := MainSequence([]PackagePoint{{Package: "p", Instability: 1.5, Known: true}}); !errors.Is(err, ErrInvalid) {
		t.Errorf("instability 1.5: err = %v, want ErrInvalid", err)
	}
}

func TestHistograms(t *testing.T) {
	b, err := Cognitive([]float64{0, 0, 1, 2, 2, 2, 3, 5, 8, 13, 21}, 2)
	if err != nil {
		t.Fatal(err)
	}
	d := parseSVG(t, b)
	wantTexts(t, d, "Campbell 2018", "11 functions; 2 without a value, not drawn", "cognitive complexity", "count")
	if got := d.fills[hex(0)]; got != 22 { // bins 0..21, width 1
		t.Errorf("cognitive: %d bars, want 22", got)
	}
	b, err = Cyclomatic([]float64{1, 1, 1, 2, 3, 4, 90}, 0)
	if err != nil {
		t.Fatal(err)
	}
	d = parseSVG(t, b)
	wantTexts(t, d, "McCabe 1976", "7 functions", "(bins of 3)")
	if got := d.fills[hex(0)]; got != 31 { // 0..92 in bins of 3
		t.Errorf("cyclomatic: %d bars, want 31", got)
	}
	if _, err := Cognitive([]float64{1.5}, 0); !errors.Is(err, ErrInvalid) {
		t.Errorf("fractional complexity: err = %v, want ErrInvalid", err)
	}
}

func allCharts(t *testing.T) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	add := func(name string, b []byte, err error) {
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out[name] = b
	}
	b, err := TimeByPhase(timeInput())
	add("time", b, err)
	b, err = TokensByMember(tokensInput())
	add("tokens", b, err)
	b, err = CheckMatrix(matrixChecks, matrixInput())
	add("matrix", b, err)
	b, err = MainSequence(mainSequenceInput())
	add("mainsequence", b, err)
	b, err = Cognitive([]float64{1, 2, 3}, 0)
	add("cognitive", b, err)
	b, err = Cyclomatic([]float64{1, 2, 3}, 1)
	add("cyclomatic", b, err)
	return out
}

// Every chart is an element to paste into a page: no prolog, no URL or web font, an accessible name.
func TestChartsAreInlineAndSelfContained(t *testing.T) {
	for name, b := range allCharts(t) {
		if !bytes.HasPrefix(b, []byte("<svg ")) {
			t.Errorf("%s: starts %q, want <svg", name, b[:min(20, len(b))])
		}
		low := strings.ToLower(string(b))
		for _, bad := range []string{"<?xml", "<!--", "url(", "@font-face", "@import", "<script", "<image", "https:", "data:"} {
			if strings.Contains(low, bad) {
				t.Errorf("%s: contains %q", name, bad)
			}
		}
		d := parseSVG(t, b)
		if d.title == "" || d.attr("role") != "img" || d.attr("aria-label") != d.title {
			t.Errorf("%s: title %q, role %q, aria-label %q", name, d.title, d.attr("role"), d.attr("aria-label"))
		}
		if len(d.hrefs) != 0 {
			t.Errorf("%s: references %q", name, d.hrefs)
		}
		for _, s := range d.styles {
			if strings.Contains(s, "font-family") && !strings.Contains(s, fontStack) {
				t.Errorf("%s: font without local fallbacks: %q", name, s)
			}
		}
	}
}

func TestChartsAreDeterministic(t *testing.T) {
	first := allCharts(t)
	for i := 0; i < 3; i++ {
		for name, b := range allCharts(t) {
			if !bytes.Equal(b, first[name]) {
				t.Fatalf("%s: run %d differs from the first", name, i+2)
			}
		}
	}
}

func TestNoData(t *testing.T) {
	for name, f := range map[string]func() ([]byte, error){
		"time":         func() ([]byte, error) { return TimeByPhase(nil) },
		"tokens":       func() ([]byte, error) { return TokensByMember(nil) },
		"matrix":       func() ([]byte, error) { return CheckMatrix(nil, nil) },
		"mainsequence": func() ([]byte, error) { return MainSequence(nil) },
		"histogram":    func() ([]byte, error) { return Cognitive(nil, 0) },
	} {
		if _, err := f(); !errors.Is(err, ErrNoData) {
			t.Errorf("%s: err = %v, want ErrNoData", name, err)
		}
	}
}
