package charts

import (
	"fmt"
	"math"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Dist is a distribution of whole-number values per subject (a complexity per function).
type Dist struct {
	// Title names what is counted and its source.
	Title string
	// XLabel names the value ("cognitive complexity").
	XLabel string
	// Values are the known values, each ≥ 0 and whole.
	Values []float64
	// Unknown counts subjects without a value: not drawn, named in the title.
	Unknown int
	// Noun names one subject in the title's counts ("function"); "" means "subject".
	Noun string
}

// maxBins bounds the histogram's bars; above it values are grouped into equal whole-number bins.
const maxBins = 40

// Histogram draws d as a histogram of whole-number bins: one bar per value while the largest
// value is below maxBins, equal bins of width ⌈(max+1)/40⌉ above. The y axis counts subjects.
//
// Errors: ErrNoData when d has no values and no unknown subjects; ErrInvalid (wrapped) for a
// negative, fractional, NaN or infinite value.
func Histogram(d Dist) ([]byte, error) {
	if len(d.Values) == 0 && d.Unknown == 0 {
		return nil, ErrNoData
	}
	maxV := 0.0
	for _, v := range d.Values {
		if !finite(v) || v < 0 || v != math.Trunc(v) {
			return nil, fmt.Errorf("%w: %s: value %v is not a whole number ≥ 0", ErrInvalid, d.XLabel, v)
		}
		maxV = math.Max(maxV, v)
	}
	width := math.Max(1, math.Ceil((maxV+1)/maxBins))
	nb := int(math.Floor(maxV/width)) + 1
	bins := make([]plotter.HistogramBin, nb)
	for i := range bins {
		bins[i] = plotter.HistogramBin{Min: float64(i)*width - 0.5, Max: float64(i+1)*width - 0.5}
	}
	for _, v := range d.Values {
		bins[int(v/width)].Weight++
	}
	title := d.Title
	p := newPlot(title)
	noun := d.Noun
	if noun == "" {
		noun = "subject"
	}
	note := plural(len(d.Values), noun, noun+"s")
	if d.Unknown > 0 {
		note += "; " + plural(d.Unknown, "without a value", "without a value") + ", not drawn"
	}
	p.Title.Text += "\n" + note
	p.X.Label.Text = d.XLabel
	if width > 1 {
		p.X.Label.Text += fmt.Sprintf(" (bins of %g)", width)
	}
	p.Y.Label.Text = "count"
	p.Add(plotter.NewGrid())
	if len(d.Values) > 0 {
		h := &plotter.Histogram{Bins: bins, Width: width, FillColor: palette[0],
			LineStyle: draw.LineStyle{Color: white, Width: vg.Points(0.5)}}
		p.Add(h)
	} else {
		p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = 0, 1, 0, 1
	}
	p.Y.Min = 0
	p.X.Tick.Marker = wholeTicks{}
	p.Y.Tick.Marker = wholeTicks{}
	return render(p, vg.Points(400), vg.Points(240), title, nil)
}

var white = rgb(0xffffff)

// wholeTicks marks whole numbers only: a count or a complexity has no fractions.
type wholeTicks struct{}

func (wholeTicks) Ticks(min, max float64) []plot.Tick {
	var out []plot.Tick
	for _, t := range (plot.DefaultTicks{}).Ticks(min, max) {
		if t.Value == math.Trunc(t.Value) {
			if t.Label != "" {
				t.Label = strconv.FormatFloat(t.Value, 'f', 0, 64)
			}
			out = append(out, t)
		}
	}
	return out
}

// Cognitive returns the histogram of cognitive complexity per function.
//
// Source: G. Ann Campbell, "Cognitive Complexity: A new way of measuring understandability",
// SonarSource, 2018.
func Cognitive(values []float64, unknown int) ([]byte, error) {
	return Histogram(Dist{Title: "Cognitive complexity per function (Campbell 2018)", XLabel: "cognitive complexity",
		Values: values, Unknown: unknown, Noun: "function"})
}

// Cyclomatic returns the histogram of cyclomatic complexity per function.
//
// Source: Thomas J. McCabe, "A Complexity Measure", IEEE Transactions on Software Engineering
// SE-2(4), 1976.
func Cyclomatic(values []float64, unknown int) ([]byte, error) {
	return Histogram(Dist{Title: "Cyclomatic complexity per function (McCabe 1976)", XLabel: "cyclomatic complexity",
		Values: values, Unknown: unknown, Noun: "function"})
}
