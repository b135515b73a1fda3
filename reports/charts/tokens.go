package charts

import (
	"fmt"
	"strconv"

	"gonum.org/v1/plot/vg"
)

// SourceTokens is one usage source's reading of a member's tokens ("store", "wire", "gateway":
// see DESIGN.md, usage sources). Known is false when the source recorded nothing for the member:
// the zero value is unknown, never a count of zero.
type SourceTokens struct {
	Source string
	Tokens int64
	Known  bool
}

// MemberTokens is one member's token usage (prompt plus completion tokens) from each source.
// Member is the label shown, e.g. "case/member".
type MemberTokens struct {
	Member  string
	Sources []SourceTokens
}

// TokensByMember draws grouped horizontal bars: one group per member, top-down in the order
// given, one bar per usage source (colour per source, in first-appearance order). An unknown
// reading draws no bar: the word "unknown" stands where the bar would start, and the source's
// legend entry counts its unknown members. A known zero draws a zero-length bar with its count.
//
// Errors: ErrNoData for no members; ErrInvalid (wrapped) for a negative known count or a source
// named twice for one member.
func TokensByMember(members []MemberTokens) ([]byte, error) {
	if len(members) == 0 {
		return nil, ErrNoData
	}
	var order seriesOrder
	for _, m := range members {
		names := make([]string, len(m.Sources))
		for i, s := range m.Sources {
			if s.Known && s.Tokens < 0 {
				return nil, fmt.Errorf("%w: member %q source %q: %d tokens", ErrInvalid, m.Member, s.Source, s.Tokens)
			}
			names[i] = s.Source
		}
		if err := order.row(fmt.Sprintf("member %q", m.Member), "source", names); err != nil {
			return nil, err
		}
	}
	sources := order.names
	k := len(sources)
	barW := vg.Points(9)
	n := len(members)
	title := "Tokens per member by usage source"
	p := newPlot(title)
	p.X.Label.Text = "tokens"
	p.X.Min = 0
	sets := make([]*hbars, k)
	for i := range sets {
		sets[i] = &hbars{width: barW, fill: paletteColor(i)}
	}
	unknown := make([]int, k)
	var kx, ky, ux, uy []float64
	var known, unknownText []string
	var koff, uoff []vg.Length
	names := make([]string, n)
	for i, m := range members {
		row := float64(n - 1 - i)
		names[i] = truncate(m.Member, 40)
		have := map[string]SourceTokens{}
		for _, s := range m.Sources {
			have[s.Source] = s
		}
		for j, src := range sources {
			off := vg.Length(float64(k-1)/2-float64(j)) * barW // first source on top within the group
			s, ok := have[src]
			if !ok || !s.Known {
				unknown[j]++
				ux, uy, uoff = append(ux, 0), append(uy, row), append(uoff, off)
				unknownText = append(unknownText, src+": unknown")
				continue
			}
			v := float64(s.Tokens)
			sets[j].bars = append(sets[j].bars, hbar{y: row, lo: 0, hi: v, off: off})
			kx, ky, koff = append(kx, v), append(ky, row), append(koff, off)
			known = append(known, strconv.FormatInt(s.Tokens, 10))
		}
	}
	var legend []legendEntry
	for j, s := range sets {
		if len(s.bars) > 0 {
			p.Add(s)
		}
		label := sources[j]
		if unknown[j] > 0 {
			label += fmt.Sprintf(" (unknown for %d of %d members: no bar drawn)", unknown[j], n)
		}
		legend = append(legend, legendEntry{label: label, thumb: box{fill: s.fill}})
	}
	// Counts sit at the end of each bar, "unknown" where the bar would start.
	p.Add(&rowText{xs: kx, ys: ky, texts: known, offs: koff, size: 7})
	p.Add(&rowText{xs: ux, ys: uy, texts: unknownText, offs: uoff, size: 7, italic: true})
	if !(p.X.Max > 0) {
		p.X.Max = 1
	}
	p.Y.Min, p.Y.Max = -0.6, float64(n)-0.4
	p.NominalY(reversed(names)...)
	return render(p, vg.Points(560), vg.Points(float64(60+n*(k*9+8))), title, legend)
}
