package charts

import (
	"fmt"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
)

// PhaseSeconds is the wall time one phase of a case took, in seconds.
type PhaseSeconds struct {
	Name    string
	Seconds float64
}

// CaseTimes is one case's wall time split by phase, phases in the order they ran. A case with no
// phases had no timings recorded: it gets a row labelled so, and no bar.
type CaseTimes struct {
	Case   string
	Phases []PhaseSeconds
}

// TimeByPhase draws one stacked horizontal bar per case, top-down in the order given, each segment
// a phase (colour per phase name, legend below), with the case's total in seconds at the bar's end.
//
// Errors: ErrNoData for no cases; ErrInvalid (wrapped, naming the case and phase) for a negative,
// NaN or infinite duration or a phase named twice in one case.
//
// order optionally names phases in the order the legend lists them (and colours them), so that a
// phase keeps its colour whichever case happens to come first; phases it does not name follow in
// first-appearance order.
func TimeByPhase(cases []CaseTimes, order ...string) ([]byte, error) {
	if len(cases) == 0 {
		return nil, ErrNoData
	}
	var series seriesOrder // colours follow the pipeline's order
	if err := series.row("the phase order", "phase", order); err != nil {
		return nil, err
	}
	for _, c := range cases {
		names := make([]string, len(c.Phases))
		for i, ph := range c.Phases {
			if !finite(ph.Seconds) || ph.Seconds < 0 {
				return nil, fmt.Errorf("%w: case %q phase %q: %v seconds", ErrInvalid, c.Case, ph.Name, ph.Seconds)
			}
			names[i] = ph.Name
		}
		if err := series.row(fmt.Sprintf("case %q", c.Case), "phase", names); err != nil {
			return nil, err
		}
	}
	phases, colour := series.names, series.index
	n := len(cases)
	title := "Wall time per case by phase (seconds)"
	p := newPlot(title)
	p.X.Label.Text = "seconds"
	p.X.Min = 0
	sets := make([]*hbars, len(phases))
	for i := range phases {
		sets[i] = &hbars{width: vg.Points(12), fill: paletteColor(i)}
	}
	names := make([]string, n)
	var tx, ty []float64
	var totals []string
	for i, c := range cases {
		row := float64(n - 1 - i) // first case on top
		names[i] = truncate(c.Case, 40)
		if len(c.Phases) == 0 {
			names[i] = truncate(c.Case, 28) + " (no timings recorded)"
			continue
		}
		at := 0.0
		for _, ph := range c.Phases {
			s := sets[colour[ph.Name]]
			s.bars = append(s.bars, hbar{y: row, lo: at, hi: at + ph.Seconds})
			at += ph.Seconds
		}
		tx, ty = append(tx, at), append(ty, row)
		totals = append(totals, strconv.FormatFloat(at, 'f', 1, 64)+" s")
	}
	var legend []legendEntry
	for i, s := range sets {
		if len(s.bars) > 0 {
			p.Add(s)
		}
		legend = append(legend, legendEntry{label: phases[i], thumb: box{fill: s.fill}})
	}
	if len(tx) > 0 {
		p.Add(&rowText{xs: tx, ys: ty, texts: totals, size: 8})
	}
	if !(p.X.Max > 0) {
		p.X.Max = 1 // no case has timings, or all are 0 s: an axis still needs a range
	}
	p.Y.Min, p.Y.Max = -0.6, float64(n)-0.4
	p.NominalY(reversed(names)...)
	return render(p, vg.Points(560), vg.Points(float64(60+18*n)), title, legend)
}

var _ plot.Plotter = (*hbars)(nil)
