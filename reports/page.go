package reports

import (
	"html/template"
	"strconv"

	"github.com/assay-audit/assay/reports/charts"
)

// pageCSS is the inline style sheet of every HTML report: system fonts only (no web font is
// fetched), tables that survive printing (repeated headers, no split rows), charts that shrink
// to the page, status words that carry meaning in greyscale.
const pageCSS = `
:root { color-scheme: light; --fg:#1b1b1b; --muted:#5c5c5c; --line:#d0d0d0; --bg-alt:#f5f6f7;
  --ok:#1b5e20; --ok-bg:#e3f3e6; --bad:#8b0000; --bad-bg:#fbe4e4; --warn:#6b4a00; --warn-bg:#fff3cd; --unk-bg:#eeeeee; }
* { box-sizing: border-box; }
body { font-family: system-ui, -apple-system, "Segoe UI", "Liberation Sans", Arial, sans-serif; color: var(--fg);
  margin: 0 auto; max-width: 1360px; padding: 16px 24px 48px; line-height: 1.4; font-size: 14px; background: #fff; }
h1 { font-size: 22px; margin: 8px 0 4px; } h2 { font-size: 18px; margin: 28px 0 8px; border-bottom: 1px solid var(--line); padding-bottom: 4px; }
h3 { font-size: 15px; margin: 18px 0 6px; }
code, .mono { font-family: ui-monospace, "DejaVu Sans Mono", "Liberation Mono", Menlo, monospace; font-size: 12px; }
.hash { word-break: break-all; }
.muted { color: var(--muted); }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 2px 16px; margin: 8px 0; }
dl.facts dt { color: var(--muted); } dl.facts dd { margin: 0; }
table { border-collapse: collapse; width: 100%; margin: 8px 0 16px; font-size: 13px; }
th, td { border: 1px solid var(--line); padding: 3px 6px; text-align: left; vertical-align: top; }
th { background: var(--bg-alt); font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.num .note { white-space: normal; display: inline-block; max-width: 14em; font-size: 11px; text-align: right; }
.scroll { overflow-x: auto; }
tbody tr:nth-child(even) { background: #fafafa; }
.k { display: inline-block; font-size: 10px; padding: 0 3px; border-radius: 3px; margin-left: 4px; border: 1px solid var(--line);
  color: var(--muted); text-transform: lowercase; }
.k.proxy, .k.partial { color: var(--warn); background: var(--warn-bg); border-color: #e0c46c; }
.k.unavailable, .k.unknown { color: #333; background: var(--unk-bg); border-color: #aaa; font-style: italic; }
.status { font-weight: 600; padding: 0 4px; border-radius: 3px; white-space: nowrap; }
.status.passed, .status.accepted, .status.exact { color: var(--ok); background: var(--ok-bg); }
.status.failed, .status.rejected, .status.mismatch, .status.refused { color: var(--bad); background: var(--bad-bg); }
.status.skipped, .status.non_certifiable, .status.within_tolerance { color: var(--warn); background: var(--warn-bg); }
.status.not_recorded, .status.unknown { color: #333; background: var(--unk-bg); font-style: italic; }
.banner { border: 2px solid #b58900; background: var(--warn-bg); padding: 8px 12px; margin: 12px 0; border-radius: 4px; }
.charts { display: flex; flex-wrap: wrap; gap: 16px; align-items: flex-start; }
figure { margin: 8px 0; max-width: 100%; }
.charts > figure { flex: 1 1 440px; min-width: 0; max-width: 640px; }
sup.ref { font-size: 10px; color: var(--muted); margin-left: 2px; }
ol.notes { font-size: 12px; color: var(--muted); margin: 0 0 12px; padding-left: 2em; } figcaption { font-size: 12px; color: var(--muted); max-width: 60em; }
svg.assay-chart { max-width: 100%; height: auto; display: block; }
.nochart { padding: 12px; border: 1px dashed var(--line); color: var(--muted); }
details > summary { cursor: pointer; }
section.case { border-top: 2px solid var(--line); padding-top: 4px; margin-top: 20px; }
h4 { font-size: 13px; margin: 12px 0 4px; }
pre { white-space: pre-wrap; word-break: break-all; font-size: 11px; margin: 4px 0; }
ul.reasons { margin: 4px 0 8px; color: var(--bad); }
@media print {
  body { max-width: none; padding: 0; font-size: 10pt; }
  h2 { break-after: avoid; page-break-after: avoid; }
  figure, tr, .case { break-inside: avoid; page-break-inside: avoid; }
  thead { display: table-header-group; }
  a { color: inherit; text-decoration: underline; }
  .screen-only { display: none !important; }
  .scroll { overflow: visible; }
  details { display: block; } details > summary { list-style: none; }
  * { -webkit-print-color-adjust: exact; print-color-adjust: exact; }
  @page { margin: 14mm 12mm; }
}
`

// chartHTML returns a chart for an html/template page: the SVG charts drew (trusted: package
// charts escapes every text it writes), or a sentence saying why there is none.
func chartHTML(svg []byte, err error, none string) template.HTML {
	if err != nil {
		if err == charts.ErrNoData {
			return template.HTML(`<p class="nochart">` + template.HTMLEscapeString(none) + `</p>`)
		}
		return template.HTML(`<p class="nochart">chart not drawn: ` + template.HTMLEscapeString(err.Error()) + `</p>`)
	}
	return template.HTML(svg)
}

// formatFloat prints a metric value: integers without decimals, ratios with four.
func formatFloat(v float64, integer bool) string {
	if integer {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'f', 4, 64)
}
