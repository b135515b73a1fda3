package charts

import (
	"fmt"
	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Status is a check's outcome in one case, as the matrix draws it.
type Status string

// The statuses a cell can have. NotRecorded is a check the case has no result for: its own
// cell, never folded into passed or skipped.
const (
	Passed      Status = "passed"
	Failed      Status = "failed"
	Skipped     Status = "skipped"
	NotRecorded Status = "not_recorded"
)

// statusLook is how a status is told apart on screen (colour) and in greyscale print (glyph).
type statusLook struct {
	label string
	fill  color.Color
	glyph draw.GlyphStyle
	text  string
}

var looks = map[Status]statusLook{
	Passed:      {label: "passed (dot)", fill: rgb(0x8fd19e), glyph: draw.GlyphStyle{Shape: draw.CircleGlyph{}, Radius: vg.Points(2.5), Color: rgb(0x1b5e20)}},
	Failed:      {label: "failed (cross)", fill: rgb(0xe8787a), glyph: draw.GlyphStyle{Shape: draw.CrossGlyph{}, Radius: vg.Points(3.5), Color: rgb(0x5b0000)}},
	Skipped:     {label: "skipped (ring)", fill: rgb(0xd9d9d9), glyph: draw.GlyphStyle{Shape: draw.RingGlyph{}, Radius: vg.Points(3), Color: rgb(0x444444)}},
	NotRecorded: {label: "not recorded or unknown (?)", fill: color.White, text: "?"},
}

// statusOrder is the legend's order.
var statusOrder = []Status{Passed, Failed, Skipped, NotRecorded}

// MatrixRow is one case's row of the matrix: the status of each check by check name. A check
// missing from Statuses is drawn as NotRecorded.
type MatrixRow struct {
	Case     string
	Statuses map[string]Status
}

// CheckMatrix draws a case × check grid: one row per case (top-down in the order given), one
// column per check (in the order given, names rotated under the grid), each cell coloured by its
// status and marked with a glyph that survives greyscale printing: passed a dot, failed a cross,
// skipped a ring, not recorded a question mark.
//
// Errors: ErrNoData for no rows or no checks; ErrInvalid (wrapped, naming case and check) for a
// status other than the four above.
func CheckMatrix(checks []string, rows []MatrixRow) ([]byte, error) {
	if len(rows) == 0 || len(checks) == 0 {
		return nil, ErrNoData
	}
	cells := &matrixCells{cols: len(checks), rows: len(rows)}
	for _, r := range rows {
		for _, ch := range checks {
			st, ok := r.Statuses[ch]
			if !ok || st == "" {
				st = NotRecorded
			}
			if _, known := looks[st]; !known {
				return nil, fmt.Errorf("%w: case %q check %q: status %q", ErrInvalid, r.Case, ch, st)
			}
			cells.status = append(cells.status, st)
		}
	}
	title := "Checks per case"
	p := newPlot(title)
	p.Add(cells)
	names := make([]string, len(rows))
	for i, r := range rows {
		names[i] = truncate(r.Case, 40)
	}
	cols := make([]string, len(checks))
	for j, c := range checks {
		cols[j] = truncate(c, 24)
	}
	p.NominalX(cols...)
	p.NominalY(reversed(names)...)
	p.X.Tick.Label.Rotation = math.Pi / 4
	p.X.Tick.Label.XAlign = draw.XRight
	p.X.Tick.Label.YAlign = draw.YTop
	p.X.Min, p.X.Max = -0.5, float64(len(checks))-0.5
	p.Y.Min, p.Y.Max = -0.5, float64(len(rows))-0.5
	p.X.Padding, p.Y.Padding = 0, 0
	var legend []legendEntry
	for _, st := range statusOrder {
		lk := looks[st]
		legend = append(legend, legendEntry{label: lk.label, thumb: box{fill: lk.fill, glyph: lk.glyph, text: lk.text}})
	}
	longest := 0.0
	for _, c := range cols {
		longest = math.Max(longest, p.X.Tick.Label.Width(c).Points())
	}
	w := math.Max(360, 230+26*float64(len(checks)))
	h := 50 + 18*float64(len(rows)) + longest*0.75
	return render(p, vg.Points(w), vg.Points(h), title, legend)
}

// matrixCells draws the grid; cell (row i, column j) is status[i*cols+j], row 0 at the top.
type matrixCells struct {
	cols, rows int
	status     []Status
}

func (m *matrixCells) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	for k, st := range m.status {
		i, j := k/m.cols, k%m.cols
		row := float64(m.rows - 1 - i)
		x0, x1 := trX(float64(j)-0.5), trX(float64(j)+0.5)
		y0, y1 := trY(row-0.5), trY(row+0.5)
		lk := looks[st]
		box{fill: lk.fill, glyph: lk.glyph, text: lk.text}.draw(&c, vg.Rectangle{Min: vg.Point{X: x0, Y: y0}, Max: vg.Point{X: x1, Y: y1}}, cellLine)
	}
}

var cellLine = draw.LineStyle{Color: rgb(0x9e9e9e), Width: vg.Points(0.75)}

func (m *matrixCells) DataRange() (xmin, xmax, ymin, ymax float64) {
	return -0.5, float64(m.cols) - 0.5, -0.5, float64(m.rows) - 0.5
}
