package charts

import (
	"fmt"
	"image/color"
	"math"
	"path"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// PackagePoint is one package on the main sequence plot: Martin's instability I = Ce/(Ca+Ce) and
// abstractness A (abstract types over all types), both in [0, 1].
type PackagePoint struct {
	Package      string
	Instability  float64
	Abstractness float64
	// Known is true when both values exist. The zero value is unknown: the package is not drawn
	// and the caption counts it, never placing it at (0, 0).
	Known bool
	// Approximate is true when either value is a proxy or was computed with coverage below 1:
	// the point is drawn hollow and the legend says so.
	Approximate bool
}

// distance bands of D = |A + I − 1|, each with its colour and, for greyscale print, its glyph.
type band struct {
	max          float64 // upper bound, exclusive; the last band has +Inf
	label        string
	colour       color.Color
	solid, empty draw.GlyphDrawer
}

var bands = []band{
	{max: 0.2, label: "D < 0.2 (near the main sequence)", colour: rgb(0x1a9850), solid: draw.CircleGlyph{}, empty: draw.RingGlyph{}},
	{max: 0.5, label: "0.2 ≤ D < 0.5", colour: rgb(0xE69F00), solid: draw.PyramidGlyph{}, empty: draw.TriangleGlyph{}},
	{max: math.Inf(1), label: "D ≥ 0.5 (zone of pain or of uselessness)", colour: rgb(0xd73027), solid: draw.BoxGlyph{}, empty: draw.SquareGlyph{}},
}

func bandOf(d float64) int {
	for i, b := range bands {
		if d < b.max {
			return i
		}
	}
	return len(bands) - 1
}

// maxMainSequenceLabels is how many packages, farthest from the main sequence first, are named
// on the plot; the report's package table names them all.
const maxMainSequenceLabels = 12

// MainSequence draws abstractness A (y) against instability I (x) for each known package, the
// main sequence A + I = 1 as a dashed line, and each point coloured and shaped by its distance
// D = |A + I − 1|. The packages farthest from the line are labelled with their last path element.
//
// Source: Robert C. Martin, "OO Design Quality Metrics: An Analysis of Dependencies" (1994).
//
// Errors: ErrNoData when no package is known (nor unknown: an empty input); ErrInvalid (wrapped)
// for a known value outside [0, 1] or NaN.
func MainSequence(pkgs []PackagePoint) ([]byte, error) {
	if len(pkgs) == 0 {
		return nil, ErrNoData
	}
	type pt struct {
		PackagePoint
		d float64
	}
	var known []pt
	unknown := 0
	for _, p := range pkgs {
		if !p.Known {
			unknown++
			continue
		}
		for _, v := range []float64{p.Instability, p.Abstractness} {
			if !(v >= 0 && v <= 1) {
				return nil, fmt.Errorf("%w: package %q: instability %v, abstractness %v: want values in [0, 1]",
					ErrInvalid, p.Package, p.Instability, p.Abstractness)
			}
		}
		known = append(known, pt{p, math.Abs(p.Abstractness + p.Instability - 1)})
	}
	title := "Main sequence: abstractness vs instability (Martin 1994)"
	p := newPlot(title)
	if unknown > 0 {
		p.Title.Text += "\n" + plural(unknown, "package", "packages") + " without instability or abstractness not drawn"
	}
	p.X.Label.Text = "instability I = Ce / (Ca + Ce)"
	p.Y.Label.Text = "abstractness A"
	p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = 0, 1, 0, 1
	p.Add(plotter.NewGrid())
	line, err := plotter.NewLine(plotter.XYs{{X: 0, Y: 1}, {X: 1, Y: 0}})
	if err != nil {
		return nil, fmt.Errorf("charts: main sequence line: %w", err)
	}
	line.LineStyle = draw.LineStyle{Color: rgb(0x555555), Width: vg.Points(1), Dashes: []vg.Length{vg.Points(4), vg.Points(3)}}
	p.Add(line)
	anyApprox := false
	// One scatter per band and fill, so each gets one glyph style.
	for bi, b := range bands {
		for _, approx := range []bool{false, true} {
			var xys plotter.XYs
			for _, k := range known {
				if bandOf(k.d) == bi && k.Approximate == approx {
					xys = append(xys, plotter.XY{X: k.Instability, Y: k.Abstractness})
				}
			}
			if len(xys) == 0 {
				continue
			}
			anyApprox = anyApprox || approx
			s, err := plotter.NewScatter(xys)
			if err != nil {
				return nil, fmt.Errorf("charts: main sequence points: %w", err)
			}
			s.GlyphStyle = glyphFor(b, approx)
			p.Add(s)
		}
	}
	// Label the farthest packages; ties by name, so the choice is stable.
	order := append([]pt(nil), known...)
	sort.SliceStable(order, func(i, j int) bool {
		if order[i].d != order[j].d {
			return order[i].d > order[j].d
		}
		return order[i].Package < order[j].Package
	})
	if len(order) > maxMainSequenceLabels {
		order = order[:maxMainSequenceLabels]
	}
	var xs, ys []float64
	var names []string
	for _, k := range order {
		xs, ys = append(xs, k.Instability), append(ys, k.Abstractness)
		names = append(names, truncate(path.Base(k.Package), 24))
	}
	if len(names) > 0 {
		p.Add(&rowText{xs: xs, ys: ys, texts: names, size: 7})
	}
	legend := []legendEntry{{label: "main sequence A + I = 1", thumb: line}}
	for _, b := range bands {
		legend = append(legend, legendEntry{label: b.label, thumb: glyphThumb(glyphFor(b, false))})
	}
	if anyApprox {
		legend = append(legend, legendEntry{label: "hollow: proxy value or incomplete coverage", thumb: glyphThumb(glyphFor(bands[0], true))})
	}
	return render(p, vg.Points(440), vg.Points(420), title, legend)
}

func glyphFor(b band, approx bool) draw.GlyphStyle {
	shape := b.solid
	if approx {
		shape = b.empty
	}
	return draw.GlyphStyle{Shape: shape, Color: b.colour, Radius: vg.Points(3.5)}
}

// glyphThumb is a legend thumbnail showing one glyph.
type glyphThumb draw.GlyphStyle

func (g glyphThumb) Thumbnail(c *draw.Canvas) {
	c.DrawGlyph(draw.GlyphStyle(g), vg.Point{X: (c.Min.X + c.Max.X) / 2, Y: (c.Min.Y + c.Max.Y) / 2})
}

var _ plot.Thumbnailer = glyphThumb{}
