// Package charts draws assay's report charts as inline SVG with gonum.org/v1/plot (its vg/vgsvg
// backend). Every function returns an <svg> element ready to paste into an HTML document: no XML
// prolog, no reference to any URL or web font (text uses the Liberation Sans metrics and names
// locally installed fallbacks), role="img" with an aria-label and a <title> first child for screen
// readers. Output is a pure function of the input: the same input gives the same bytes.
//
// Missing evidence is never drawn as zero: an unknown token count is labelled "unknown" where its
// bar would be, a check without a recorded status is its own "not recorded" cell, and a package or
// function without a metric value is left out of the plot and counted in the caption.
package charts

import (
	"bytes"
	"errors"
	"fmt"
	"html"
	"image/color"
	"math"
	"strings"

	xfont "golang.org/x/image/font"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// ErrNoData is returned when there is nothing to draw (no cases, no members, no values): the
// caller says so in words instead of drawing an empty frame.
var ErrNoData = errors.New("charts: nothing to draw")

// ErrInvalid is wrapped by errors for input no chart can honestly draw: a negative, NaN or
// infinite duration or count, an unknown check status, a ratio outside [0, 1].
var ErrInvalid = errors.New("charts: invalid input")

// The typeface the SVG is measured with. Liberation Sans is metric-compatible with Arial and
// Helvetica, so the fallbacks named in fontStack lay out the same.
var sans = font.Font{Typeface: "Liberation", Variant: "Sans"}

const fontStack = `'Liberation Sans',Arial,Helvetica,sans-serif`

// Okabe & Ito's colour-blind-safe palette ("Color Universal Design", 2008), in drawing order.
var palette = []color.Color{
	rgb(0x0072B2), rgb(0xE69F00), rgb(0x009E73), rgb(0xCC79A7),
	rgb(0x56B4E9), rgb(0xD55E00), rgb(0xF0E442), rgb(0x000000),
}

func rgb(v uint32) color.RGBA {
	return color.RGBA{R: uint8(v >> 16), G: uint8(v >> 8), B: uint8(v), A: 0xff}
}

func paletteColor(i int) color.Color { return palette[i%len(palette)] }

func textStyle(size vg.Length) text.Style {
	return text.Style{Color: color.Black, Font: font.From(sans, size), Handler: plot.DefaultTextHandler}
}

// newPlot returns a plot whose every text uses the sans typeface (alignments stay gonum's).
func newPlot(title string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font = font.From(sans, 12)
	p.Title.Padding = vg.Points(6)
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font = font.From(sans, 10)
		a.Tick.Label.Font = font.From(sans, 9)
	}
	p.Legend.TextStyle.Font = font.From(sans, 9)
	p.Legend.ThumbnailWidth = vg.Points(14)
	return p
}

// legendEntry is one line of the legend drawn below a chart.
type legendEntry struct {
	label string
	thumb plot.Thumbnailer
}

// render draws p on a w×h canvas, with the legend entries listed below the plot, and returns the
// inline SVG element. title becomes the SVG's accessible name.
func render(p *plot.Plot, w, h vg.Length, title string, legend []legendEntry) ([]byte, error) {
	const lineH = 13
	legendH := vg.Length(0)
	if len(legend) > 0 {
		legendH = vg.Points(float64(lineH*len(legend) + 10))
	}
	c := vgsvg.NewWith(vgsvg.UseWH(w, h+legendH))
	dc := draw.New(c)
	p.Draw(draw.Crop(dc, 0, 0, legendH, 0))
	if len(legend) > 0 {
		l := plot.NewLegend()
		l.TextStyle = textStyle(9)
		l.ThumbnailWidth = vg.Points(14)
		l.Top, l.Left = true, true
		l.Padding = vg.Points(3)
		for _, e := range legend {
			l.Add(e.label, e.thumb)
		}
		l.Draw(draw.Crop(dc, vg.Points(12), 0, 0, -(h)))
	}
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return nil, fmt.Errorf("charts: write svg: %w", err)
	}
	return inline(buf.Bytes(), title)
}

// inline turns vgsvg's standalone document into an element for an HTML page: the XML prolog and
// generator comment go, the accessible name comes in, and font-family names local fallbacks.
func inline(doc []byte, title string) ([]byte, error) {
	start := bytes.Index(doc, []byte("<svg"))
	if start < 0 {
		return nil, errors.New("charts: vgsvg wrote no <svg> element")
	}
	doc = doc[start:]
	end := bytes.IndexByte(doc, '>')
	if end < 0 {
		return nil, errors.New("charts: vgsvg wrote an unterminated <svg> tag")
	}
	esc := html.EscapeString(title)
	var out bytes.Buffer
	out.Grow(len(doc) + 2*len(esc) + 128)
	out.Write(doc[:end])
	fmt.Fprintf(&out, ` class="assay-chart" role="img" aria-label="%s"><title>%s</title>`, esc, esc)
	rest := doc[end+1:]
	out.Write(bytes.ReplaceAll(rest, []byte("font-family:Liberation Sans;"), []byte("font-family:"+fontStack+";")))
	return out.Bytes(), nil
}

// box is a legend thumbnail: a filled square with an outline.
type box struct {
	fill  color.Color
	glyph draw.GlyphStyle // drawn in the middle when Shape is not nil
	text  string          // drawn in the middle when not ""
}

func (b box) Thumbnail(c *draw.Canvas) { b.draw(c, c.Rectangle, outline) }

// draw fills r, outlines it with line, and marks its middle with the glyph and the text.
func (b box) draw(c *draw.Canvas, r vg.Rectangle, line draw.LineStyle) {
	pts := []vg.Point{{X: r.Min.X, Y: r.Min.Y}, {X: r.Min.X, Y: r.Max.Y}, {X: r.Max.X, Y: r.Max.Y}, {X: r.Max.X, Y: r.Min.Y}}
	if b.fill != nil {
		c.FillPolygon(b.fill, pts)
	}
	c.StrokeLines(line, append(pts, pts[0]))
	mid := vg.Point{X: (r.Min.X + r.Max.X) / 2, Y: (r.Min.Y + r.Max.Y) / 2}
	if b.glyph.Shape != nil {
		c.DrawGlyph(b.glyph, mid)
	}
	if b.text != "" {
		sty := textStyle(8)
		sty.XAlign, sty.YAlign = draw.XCenter, draw.YCenter
		c.FillText(sty, mid, b.text)
	}
}

// seriesOrder collects a chart's series names (phases, usage sources) in first-appearance order,
// so that colours follow the data, and refuses a name given twice in one row.
type seriesOrder struct {
	names []string
	index map[string]int
}

// row adds the names of one row (who, e.g. `case "x"`); a name given twice in it is ErrInvalid.
func (o *seriesOrder) row(who, what string, names []string) error {
	if o.index == nil {
		o.index = map[string]int{}
	}
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			return fmt.Errorf("%w: %s names %s %q twice", ErrInvalid, who, what, n)
		}
		seen[n] = true
		if _, ok := o.index[n]; !ok {
			o.index[n] = len(o.names)
			o.names = append(o.names, n)
		}
	}
	return nil
}

var outline = draw.LineStyle{Color: rgb(0x333333), Width: vg.Points(0.5)}

// hbar is one horizontal bar: from value lo to hi at category row y, shifted by off across it.
type hbar struct {
	y      float64
	lo, hi float64
	off    vg.Length
}

// hbars draws horizontal bars of one colour; plotter.BarChart would draw a degenerate outline for
// a value it does not have, and assay draws nothing where there is no evidence.
type hbars struct {
	bars  []hbar
	width vg.Length
	fill  color.Color
}

func (b *hbars) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	for _, r := range b.bars {
		y0 := trY(r.y) + r.off - b.width/2
		y1 := y0 + b.width
		x0, x1 := trX(r.lo), trX(r.hi)
		pts := []vg.Point{{X: x0, Y: y0}, {X: x0, Y: y1}, {X: x1, Y: y1}, {X: x1, Y: y0}}
		c.FillPolygon(b.fill, c.ClipPolygonXY(pts))
		c.StrokeLines(outline, c.ClipLinesXY(append(pts, pts[0]))...)
	}
}

func (b *hbars) DataRange() (xmin, xmax, ymin, ymax float64) {
	xmin, ymin = math.Inf(1), math.Inf(1)
	xmax, ymax = math.Inf(-1), math.Inf(-1)
	for _, r := range b.bars {
		xmin, xmax = math.Min(xmin, r.lo), math.Max(xmax, r.hi)
		ymin, ymax = math.Min(ymin, r.y), math.Max(ymax, r.y)
	}
	return xmin, xmax, ymin, ymax
}

func (b *hbars) GlyphBoxes(p *plot.Plot) []plot.GlyphBox {
	boxes := make([]plot.GlyphBox, len(b.bars))
	for i, r := range b.bars {
		boxes[i].X = p.X.Norm(r.hi)
		boxes[i].Y = p.Y.Norm(r.y)
		boxes[i].Rectangle = vg.Rectangle{Min: vg.Point{Y: r.off - b.width/2}, Max: vg.Point{Y: r.off + b.width/2}}
	}
	return boxes
}

// rowText draws short texts at data points, left-aligned, each shifted across its row by its own
// offset (to sit beside its bar within a group) and 3 points along the value axis.
type rowText struct {
	xs, ys []float64
	texts  []string
	offs   []vg.Length // nil: no shift
	size   vg.Length
	italic bool
}

func (t *rowText) style() text.Style {
	sty := textStyle(t.size)
	sty.YAlign = draw.YCenter
	if t.italic {
		sty.Font.Style = xfont.StyleItalic
		sty.Color = rgb(0x7a0000)
	}
	return sty
}

func (t *rowText) off(i int) vg.Length {
	if t.offs == nil {
		return 0
	}
	return t.offs[i]
}

func (t *rowText) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	sty := t.style()
	for i, s := range t.texts {
		pt := vg.Point{X: trX(t.xs[i]) + vg.Points(3), Y: trY(t.ys[i]) + t.off(i)}
		c.FillText(sty, pt, s) // beside its point, in the room GlyphBoxes reserved

	}
}

func (t *rowText) DataRange() (xmin, xmax, ymin, ymax float64) {
	xmin, ymin = math.Inf(1), math.Inf(1)
	xmax, ymax = math.Inf(-1), math.Inf(-1)
	for i := range t.xs {
		xmin, xmax = math.Min(xmin, t.xs[i]), math.Max(xmax, t.xs[i])
		ymin, ymax = math.Min(ymin, t.ys[i]), math.Max(ymax, t.ys[i])
	}
	return xmin, xmax, ymin, ymax
}

// GlyphBoxes reserves room for each text to the right of its point, so the axes leave space.
func (t *rowText) GlyphBoxes(p *plot.Plot) []plot.GlyphBox {
	sty := t.style()
	boxes := make([]plot.GlyphBox, len(t.texts))
	for i, s := range t.texts {
		w, h := sty.Width(s), sty.Height(s)
		boxes[i].X, boxes[i].Y = p.X.Norm(t.xs[i]), p.Y.Norm(t.ys[i])
		boxes[i].Rectangle = vg.Rectangle{
			Min: vg.Point{X: vg.Points(3), Y: t.off(i) - h/2},
			// A tenth more than the measured width: a reader's fallback font may be wider.
			Max: vg.Point{X: vg.Points(3) + w*11/10, Y: t.off(i) + h/2},
		}
	}
	return boxes
}

// reversed returns names bottom-up, so that a nominal Y axis lists them top-down.
func reversed(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[len(names)-1-i] = n
	}
	return out
}

// truncate keeps a tick label readable; the full name is in the report's tables.
func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}

func joinNonEmpty(sep string, parts ...string) string {
	var keep []string
	for _, p := range parts {
		if p != "" {
			keep = append(keep, p)
		}
	}
	return strings.Join(keep, sep)
}
