package runreport

import (
	"fmt"
	"html"
	"io"
	"strings"
	"time"
)

// WriteHTML writes the account as one self-contained HTML page: a header
// with the outcome, tokens and cost per iteration as a small inline SVG
// chart, and a timeline with one row per iteration whose prompt, model
// text, tool calls, validator results and retry prompt expand in place
// (<details>, no script). The page loads nothing from the network: its
// style is inline and its Content-Security-Policy forbids every fetch.
func WriteHTML(w io.Writer, r *Run, opts Options) error {
	its, err := r.Select(opts)
	if err != nil {
		return err
	}
	return writePage(w, newPage(r, its, opts))
}

type page struct {
	Run        *Run
	Title      string
	Status     string
	StatusTone string
	Facts      [][2]string
	Reason     string
	Error      string
	Chart      chart
	Rows       []row
	Warnings   []string
	Artifacts  []Artifact
	Label      string
}

type row struct {
	Iteration
	Left, Width   float64 // the bar's place on the run's time axis, in percent
	VerdictTone   string
	Meta          string
	PromptIsRetry bool
	Items         []item
}

type item struct {
	Entry
	At      string
	Mark    string
	Tone    string
	Summary string
	Dur     string
}

func newPage(r *Run, its []Iteration, opts Options) page {
	p := page{Run: r, Status: r.Status(), Warnings: r.Warnings, Artifacts: r.Artifacts, Label: "Iteration"}
	p.StatusTone = map[string]string{"COMPLETED": "ok", "NOT COMPLETED": "bad", "UNFINISHED": "warn"}[r.outcomeStatus()]
	if r.Unverified {
		p.StatusTone = "warn"
	}
	name := r.Agent
	if r.Skill != "" {
		name, p.Label = "skill "+r.Skill, "Turn"
	}
	p.Title = name
	add := func(k, v string) {
		if v != "" {
			p.Facts = append(p.Facts, [2]string{k, v})
		}
	}
	add("run", r.ID)
	if pl := r.Pipeline; pl != nil {
		p.Title = "pipeline " + pl.Name()
		add("model", r.modelName())
		add("request", pl.Request)
		add("repo", pl.Repo)
		for _, st := range pl.Stages {
			v := st.Summary()
			if st.Error != "" {
				v += " — " + st.Error
			}
			for _, viol := range st.Violations {
				v += " — violation: " + viol
			}
			add("stage "+st.ID, v)
		}
		for _, a := range pl.AgentRuns {
			add("agent "+a.Dir, "run "+a.RunID+" "+a.outcome())
		}
	} else {
		add("model", r.Model)
	}
	add("goal", r.Goal)
	add("pipeline run", r.PipelineRun)
	add("sandbox", r.Sandbox)
	add("agent folder", r.AgentDir)
	add("work dir", r.WorkDir)
	if !r.Started.IsZero() {
		add("started", r.Started.UTC().Format("2006-01-02 15:04:05 MST"))
	}
	if o := r.Outcome; o != nil && r.Pipeline != nil {
		add("duration", FormatDuration(o.Duration))
		p.Reason = o.CompletionReason
		if o.ErrorMessage != "" {
			p.Error = o.ErrorMessage
		}
	} else if o != nil {
		add("iterations", fmt.Sprint(o.Iterations))
		add("tokens", strings.TrimPrefix(usageText(o.Usage), "tokens "))
		if note := o.UsageNote(); note != "" {
			add("usage", note)
		}
		add("cost", fmt.Sprintf("$%.4f", o.CostUSD))
		add("duration", DurationText(o.Duration, o.TestBaseline))
		p.Reason = strings.TrimSpace(o.CompletionReason + " — " + o.Reason)
		if o.ErrorCode != "" || o.ErrorMessage != "" {
			p.Error = o.ErrorCode + ": " + o.ErrorMessage
		}
	}
	start, end := timeAxis(r)
	total := end.Sub(start)
	for _, it := range its {
		p.Rows = append(p.Rows, newRow(r, it, start, total))
	}
	p.Chart = newChart(its)
	return p
}

// newRow is one iteration of the page, placed on the run's time axis.
func newRow(r *Run, it Iteration, start time.Time, total time.Duration) row {
	rw := row{Iteration: it, PromptIsRetry: r.retryBefore(it) != nil, Meta: metaText(it)}
	if total > 0 && !it.Started.IsZero() {
		rw.Left = pct(it.Started.Sub(start), total)
		stop := it.Ended
		if stop.IsZero() {
			stop = lastTime(it, it.Started)
		}
		rw.Width = max(pct(stop.Sub(it.Started), total), 0.6)
		rw.Left = min(rw.Left, 100-rw.Width)
	}
	if v := it.Verdict; v != nil {
		rw.VerdictTone = map[string]string{"complete": "ok", "continue": "warn", "stop": "bad"}[v.Result]
	}
	for _, e := range it.Entries {
		rw.Items = append(rw.Items, newItem(it, e))
	}
	return rw
}

// newItem is one entry of an iteration on the page.
func newItem(it Iteration, e Entry) item {
	in := item{Entry: e, Mark: htmlMark(e), Tone: "ok"}
	if !e.OK && e.Kind != KindText && e.Kind != KindTransition {
		in.Tone = "bad"
	}
	if e.Kind == KindRetry {
		in.Tone = "warn"
	}
	if !e.Time.IsZero() && !it.Started.IsZero() {
		in.At = "+" + FormatDuration(e.Time.Sub(it.Started))
	}
	if e.Duration > 0 {
		in.Dur = FormatDuration(e.Duration)
	}
	in.Summary = map[string]string{KindTool: "output", KindRetry: "retry prompt", KindDenied: "reason", KindText: "text", KindValidator: "output"}[e.Kind]
	if e.Kind == KindValidator && e.Detail != "" {
		in.Detail = tail(e.Detail, e.Omitted, true)
	}
	if in.Summary == "" {
		in.Summary = "details"
	}
	return in
}

func metaText(it Iteration) string {
	parts := []string{}
	if d := it.Duration(); d > 0 {
		parts = append(parts, FormatDuration(d))
	}
	parts = append(parts, usageText(it.Usage), fmt.Sprintf("$%.4f", it.CostUSD))
	return strings.Join(parts, " · ")
}

func htmlMark(e Entry) string {
	switch e.Kind {
	case KindText:
		return "model"
	case KindTool:
		return "tool"
	case KindDenied:
		return "denied"
	case KindValidator:
		if e.OK {
			return "passed"
		}
		return "failed"
	case KindCheck:
		return "completion"
	case KindRetry:
		return "retry"
	case KindTransition:
		return "step"
	}
	return e.Kind
}

// timeAxis is the span the timeline bars are placed on.
func timeAxis(r *Run) (time.Time, time.Time) {
	var start, end time.Time
	for _, it := range r.Iterations {
		if it.Started.IsZero() {
			continue
		}
		if start.IsZero() || it.Started.Before(start) {
			start = it.Started
		}
		stop := it.Ended
		if stop.IsZero() {
			stop = lastTime(it, it.Started)
		}
		if stop.After(end) {
			end = stop
		}
	}
	return start, end
}

func lastTime(it Iteration, t time.Time) time.Time {
	for _, e := range it.Entries {
		if e.Time.After(t) {
			t = e.Time
		}
	}
	return t
}

func pct(d, total time.Duration) float64 {
	return float64(int(float64(d)/float64(total)*1000)) / 10
}

// chart is the tokens-and-cost bar chart, laid out in Go so the page needs
// no script.
type chart struct {
	Width, Height int
	Bars          []bar
	CostLine      string // SVG polyline points; "" when no iteration cost anything
	MaxTokens     int64
	MaxCost       string
	BaseY         int
}

type bar struct {
	X, W         int
	InY, InH     int
	OutY, OutH   int
	LabelX       int
	Label        string
	Title        string
	CostX, CostY int
	HasCost      bool
}

func newChart(its []Iteration) chart {
	const height, top, bottom, left = 150, 12, 22, 8
	n := len(its)
	slot := 36
	if n > 20 {
		slot = max(8, 720/n)
	}
	c := chart{Width: left*2 + n*slot, Height: height, BaseY: height - bottom}
	var maxCost float64
	for _, it := range its {
		c.MaxTokens = max(c.MaxTokens, it.Tokens())
		maxCost = max(maxCost, it.CostUSD)
	}
	c.MaxCost = fmt.Sprintf("$%.4f", maxCost)
	plot := height - top - bottom
	scale := func(v int64) int {
		if c.MaxTokens == 0 {
			return 0
		}
		return int(float64(v) / float64(c.MaxTokens) * float64(plot))
	}
	var pts []string
	for i, it := range its {
		in, out := it.Usage["input_tokens"], it.Usage["output_tokens"]
		b := bar{X: left + i*slot + slot/6, W: slot * 2 / 3, LabelX: left + i*slot + slot/2, Label: fmt.Sprint(it.N)}
		b.InH, b.OutH = scale(in), scale(out)
		b.InY = c.BaseY - b.InH
		b.OutY = b.InY - b.OutH
		b.Title = fmt.Sprintf("iteration %d: %s, $%.4f", it.N, usageText(it.Usage), it.CostUSD)
		if maxCost > 0 {
			b.HasCost = true
			b.CostX = b.LabelX
			b.CostY = c.BaseY - int(it.CostUSD/maxCost*float64(plot))
			pts = append(pts, fmt.Sprintf("%d,%d", b.CostX, b.CostY))
		}
		c.Bars = append(c.Bars, b)
	}
	c.CostLine = strings.Join(pts, " ")
	return c
}

// pageStyle is the page's only style sheet, inline.
const pageStyle = `:root{--ok:#1a7f37;--bad:#cf222e;--warn:#9a6700;--mute:#57606a;--line:#d0d7de;--bg:#f6f8fa}
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1f2328;background:#fff}
main{max-width:1100px;margin:0 auto;padding:24px}
h1{font-size:22px;margin:0 0 8px}
h2{font-size:16px;margin:28px 0 8px}
.status{display:inline-block;padding:2px 10px;border-radius:12px;color:#fff;font-size:13px;vertical-align:middle}
.status.ok{background:var(--ok)}.status.bad{background:var(--bad)}.status.warn{background:var(--warn)}
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:2px 16px;margin:12px 0}
dl.facts dt{color:var(--mute)}dl.facts dd{margin:0;font-family:ui-monospace,monospace;word-break:break-all}
.reason{margin:8px 0;padding:8px 12px;background:var(--bg);border-left:4px solid var(--line)}
.error{border-left-color:var(--bad)}
svg.chart{background:var(--bg);border:1px solid var(--line);border-radius:6px;max-width:100%}
svg .in{fill:#8cb4e8}svg .out{fill:#0969da}svg .cost{fill:none;stroke:var(--warn);stroke-width:2}
svg .dot{fill:var(--warn)}svg text{font:11px system-ui,sans-serif;fill:var(--mute)}
.legend span{margin-right:14px;color:var(--mute);font-size:12px}
.legend i{display:inline-block;width:10px;height:10px;margin-right:4px;vertical-align:middle}
ol.timeline{list-style:none;margin:0;padding:0;border-top:1px solid var(--line)}
li.timeline-row{border-bottom:1px solid var(--line);padding:10px 0}
.row-head{display:grid;grid-template-columns:120px 1fr 110px 260px;gap:10px;align-items:center}
.row-head .n{font-weight:600}.row-head .step{color:var(--mute);font-size:12px;display:block;font-family:ui-monospace,monospace}
.track{position:relative;height:14px;background:var(--bg);border-radius:3px}
.track .bar{position:absolute;top:0;height:14px;border-radius:3px;background:#0969da}
.verdict{font-weight:600}.verdict.ok,.tone-ok{color:var(--ok)}.verdict.bad,.tone-bad{color:var(--bad)}.verdict.warn,.tone-warn{color:var(--warn)}
.meta{color:var(--mute);font-size:12px;text-align:right}
ol.steps{list-style:none;margin:8px 0 0 130px;padding:0}
ol.steps li{padding:2px 0}
.at{display:inline-block;width:70px;color:var(--mute);font:12px ui-monospace,monospace}
.mark{display:inline-block;min-width:96px;font-size:12px;font-weight:600;text-transform:uppercase}
.title{font-family:ui-monospace,monospace;font-size:12.5px;word-break:break-all}
.text{white-space:pre-wrap}
.dur{color:var(--mute);font-size:12px;margin-left:6px}
details{margin:2px 0 2px 166px}details.prompt{margin:8px 0 0 130px}
summary{cursor:pointer;color:var(--mute);font-size:12px}
pre{background:var(--bg);border:1px solid var(--line);border-radius:6px;padding:8px;overflow:auto;max-height:420px;margin:4px 0;font-size:12px;white-space:pre-wrap;word-break:break-word}
.verdict-line{margin:6px 0 0 130px}
footer{margin-top:28px;color:var(--mute);font-size:12px}
`

// writePage writes the page. It escapes every text with html.EscapeString
// instead of using html/template: the template engine looks methods up by
// name at run time, which keeps every exported method of every type in the
// binary (see internal/bench's footprint test). Control characters are
// made visible as in the text account: they are not allowed in HTML, and
// a page written to a terminal (report -o -) must not drive it.
func writePage(w io.Writer, p page) error {
	var b strings.Builder
	e := escapeHTML
	b.WriteString("<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n")
	b.WriteString("<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">\n")
	b.WriteString("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<meta name=\"generator\" content=\"capstan report\">\n")
	fmt.Fprintf(&b, "<title>%s · %s · capstan run %s</title>\n<style>\n%s</style>\n</head>\n<body>\n<main>\n", e(p.Title), e(p.Status), e(p.Run.ID), pageStyle)
	if p.Run.Unverified {
		fmt.Fprintf(&b, "<p class=\"status warn\">%s</p>\n", e(Unverified))
	}
	fmt.Fprintf(&b, "<h1>%s <span class=\"status %s\">%s</span></h1>\n", e(p.Title), p.StatusTone, e(p.Status))
	if p.Reason != "" {
		fmt.Fprintf(&b, "<p class=\"reason\">%s</p>\n", e(p.Reason))
	}
	if p.Error != "" {
		fmt.Fprintf(&b, "<p class=\"reason error\">%s</p>\n", e(p.Error))
	}
	b.WriteString("<dl class=\"facts\">")
	for _, f := range p.Facts {
		fmt.Fprintf(&b, "<dt>%s</dt><dd>%s</dd>", e(f[0]), e(f[1]))
	}
	b.WriteString("</dl>\n")

	writeChart(&b, p)

	b.WriteString("\n<h2>Timeline</h2>\n<ol class=\"timeline\">\n")
	for _, rw := range p.Rows {
		writeTimelineRow(&b, p.Label, rw)
	}
	b.WriteString("</ol>\n")
	if len(p.Artifacts) > 0 {
		b.WriteString("<h2>Artifacts</h2><ul>")
		for _, a := range p.Artifacts {
			fmt.Fprintf(&b, "<li><code>%s</code> %s · %d bytes</li>", e(a.Path), e(a.Handle), a.Bytes)
		}
		b.WriteString("</ul>\n")
	}
	if len(p.Run.TestBaselines) > 0 {
		b.WriteString("<h2>Tests before the first iteration</h2><ul>")
		for _, bl := range p.Run.TestBaselines {
			fmt.Fprintf(&b, "<li>%s</li>", e(BaselineSummary(bl)))
		}
		b.WriteString("</ul>\n")
	}
	if len(p.Run.HiddenBaselines) > 0 {
		b.WriteString("<h2>Hidden tests before the first iteration</h2><ul>")
		for _, h := range p.Run.HiddenBaselines {
			fmt.Fprintf(&b, "<li>%s</li>", e(HiddenSummary(h)))
		}
		b.WriteString("</ul>\n")
	}
	if len(p.Warnings) > 0 {
		b.WriteString("<h2>Warnings</h2><ul>")
		for _, warn := range p.Warnings {
			fmt.Fprintf(&b, "<li>%s</li>", e(warn))
		}
		b.WriteString("</ul>\n")
	}
	fmt.Fprintf(&b, "<footer>capstan run %s · generated by <code>capstan report</code> from the run journal</footer>\n</main>\n</body>\n</html>\n", e(p.Run.ID))
	_, err := io.WriteString(w, b.String())
	return err
}

// escapeHTML is s for an HTML page, its control characters made visible.
func escapeHTML(s string) string { return html.EscapeString(VisibleControls(s)) }

// writeChart writes the chart of tokens and cost per iteration.
func writeChart(b *strings.Builder, p page) {
	e := escapeHTML
	unit := "iteration"
	if p.Run.Skill != "" {
		unit = "turn"
	}
	c := p.Chart
	fmt.Fprintf(b, "\n<h2>Tokens and cost per %s</h2>\n", unit)
	fmt.Fprintf(b, "<svg class=\"chart\" role=\"img\" aria-label=\"tokens and cost per %s\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\">\n", unit, c.Width, c.Height, c.Width, c.Height)
	fmt.Fprintf(b, "<line x1=\"0\" x2=\"%d\" y1=\"%d\" y2=\"%d\" stroke=\"#d0d7de\"/>\n", c.Width, c.BaseY, c.BaseY)
	for _, br := range c.Bars {
		fmt.Fprintf(b, "<g><title>%s</title><rect class=\"in\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\"/><rect class=\"out\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\"/><text x=\"%d\" y=\"%d\" dy=\"-6\" text-anchor=\"middle\">%s</text></g>\n",
			e(br.Title), br.X, br.InY, br.W, br.InH, br.X, br.OutY, br.W, br.OutH, br.LabelX, c.Height, e(br.Label))
	}
	if c.CostLine != "" {
		fmt.Fprintf(b, "<polyline class=\"cost\" points=\"%s\"/>", e(c.CostLine))
		for _, br := range c.Bars {
			fmt.Fprintf(b, "<circle class=\"dot\" cx=\"%d\" cy=\"%d\" r=\"3\"/>", br.CostX, br.CostY)
		}
		b.WriteString("\n")
	}
	b.WriteString("</svg>\n")
	fmt.Fprintf(b, "<div class=\"legend\"><span><i style=\"background:#8cb4e8\"></i>input tokens</span><span><i style=\"background:#0969da\"></i>output tokens</span><span><i style=\"background:#9a6700\"></i>cost (max %s)</span><span>tallest bar: %d tokens</span></div>\n", e(c.MaxCost), c.MaxTokens)
}

// writeTimelineRow writes one iteration of the timeline: its bar, verdict,
// prompt and entries.
func writeTimelineRow(b *strings.Builder, label string, rw row) {
	e := escapeHTML
	fmt.Fprintf(b, "<li class=\"timeline-row\" id=\"iteration-%d\" data-iteration=\"%d\">\n<div class=\"row-head\">\n", rw.N, rw.N)
	fmt.Fprintf(b, "<div><span class=\"n\">%s %d</span>", e(label), rw.N)
	if rw.Step != "" {
		fmt.Fprintf(b, "<span class=\"step\">%s</span>", e(rw.Step))
	}
	b.WriteString("</div>\n")
	fmt.Fprintf(b, "<div class=\"track\"><div class=\"bar\" style=\"left:%g%%;width:%g%%\"></div></div>\n", rw.Left, rw.Width)
	verdict := ""
	switch {
	case rw.Verdict != nil:
		verdict = rw.Verdict.Result
	case !rw.Finished:
		verdict = "cut short"
	}
	fmt.Fprintf(b, "<div class=\"verdict %s\">%s</div>\n<div class=\"meta\">%s</div>\n</div>\n", rw.VerdictTone, e(verdict), e(rw.Meta))
	if rw.Prompt != "" || rw.PromptSource != "" {
		note := ""
		if rw.PromptIsRetry {
			note = " (the retry prompt of the iteration before)"
		}
		fmt.Fprintf(b, "<details class=\"prompt\"><summary>prompt: %s%s</summary><pre>%s</pre></details>\n", e(rw.PromptSource), note, e(rw.Prompt))
	}
	b.WriteString("<ol class=\"steps\">\n")
	for _, in := range rw.Items {
		fmt.Fprintf(b, "<li class=\"entry kind-%s\"><span class=\"at\">%s</span><span class=\"mark tone-%s\">%s</span>", e(in.Kind), e(in.At), in.Tone, e(in.Mark))
		if in.Kind == KindText {
			fmt.Fprintf(b, "<span class=\"text\">%s</span>", e(in.Detail))
		} else {
			fmt.Fprintf(b, "<span class=\"title\">%s</span>", e(in.Title))
			if in.Dur != "" {
				fmt.Fprintf(b, "<span class=\"dur\">%s</span>", e(in.Dur))
			}
			if in.Detail != "" {
				fmt.Fprintf(b, "<details><summary>%s</summary><pre>%s</pre></details>", e(in.Summary), e(in.Detail))
			}
		}
		b.WriteString("</li>\n")
	}
	b.WriteString("</ol>\n")
	if v := rw.Verdict; v != nil && v.Result != "" {
		fmt.Fprintf(b, "<p class=\"verdict-line\">Verdict: <b>%s</b>", e(v.Result))
		if v.Reason != "" {
			fmt.Fprintf(b, " — %s", e(v.Reason))
		}
		b.WriteString("</p>\n")
	}
	b.WriteString("</li>\n")
}
