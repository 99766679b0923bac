package runreport

import (
	"fmt"
	"html/template"
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
	return pageTemplate.Execute(w, newPage(r, its, opts))
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
	p.StatusTone = map[string]string{"COMPLETED": "ok", "NOT COMPLETED": "bad", "UNFINISHED": "warn"}[p.Status]
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
	add("model", r.Model)
	add("goal", r.Goal)
	add("agent folder", r.AgentDir)
	add("work dir", r.WorkDir)
	if !r.Started.IsZero() {
		add("started", r.Started.UTC().Format("2006-01-02 15:04:05 MST"))
	}
	if o := r.Outcome; o != nil {
		add("iterations", fmt.Sprint(o.Iterations))
		add("tokens", strings.TrimPrefix(usageText(o.Usage), "tokens "))
		add("cost", fmt.Sprintf("$%.4f", o.CostUSD))
		add("duration", FormatDuration(o.Duration))
		p.Reason = strings.TrimSpace(o.CompletionReason + " — " + o.Reason)
		if o.ErrorCode != "" || o.ErrorMessage != "" {
			p.Error = o.ErrorCode + ": " + o.ErrorMessage
		}
	}
	start, end := timeAxis(r)
	total := end.Sub(start)
	for _, it := range its {
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
			in.Summary = map[string]string{KindTool: "output", KindRetry: "retry prompt", KindDenied: "reason", KindText: "text"}[e.Kind]
			if in.Summary == "" {
				in.Summary = "details"
			}
			rw.Items = append(rw.Items, in)
		}
		p.Rows = append(p.Rows, rw)
	}
	p.Chart = newChart(its)
	return p
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

var pageTemplate = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="capstan report">
<title>{{.Title}} · {{.Status}} · capstan run {{.Run.ID}}</title>
<style>
:root{--ok:#1a7f37;--bad:#cf222e;--warn:#9a6700;--mute:#57606a;--line:#d0d7de;--bg:#f6f8fa}
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
</style>
</head>
<body>
<main>
<h1>{{.Title}} <span class="status {{.StatusTone}}">{{.Status}}</span></h1>
{{if .Reason}}<p class="reason">{{.Reason}}</p>{{end}}
{{if .Error}}<p class="reason error">{{.Error}}</p>{{end}}
<dl class="facts">{{range .Facts}}<dt>{{index . 0}}</dt><dd>{{index . 1}}</dd>{{end}}</dl>

<h2>Tokens and cost per {{if .Run.Skill}}turn{{else}}iteration{{end}}</h2>
<svg class="chart" role="img" aria-label="tokens and cost per iteration" width="{{.Chart.Width}}" height="{{.Chart.Height}}" viewBox="0 0 {{.Chart.Width}} {{.Chart.Height}}">
<line x1="0" x2="{{.Chart.Width}}" y1="{{.Chart.BaseY}}" y2="{{.Chart.BaseY}}" stroke="#d0d7de"/>
{{range .Chart.Bars}}<g><title>{{.Title}}</title><rect class="in" x="{{.X}}" y="{{.InY}}" width="{{.W}}" height="{{.InH}}"/><rect class="out" x="{{.X}}" y="{{.OutY}}" width="{{.W}}" height="{{.OutH}}"/><text x="{{.LabelX}}" y="{{$.Chart.Height | printf "%d"}}" dy="-6" text-anchor="middle">{{.Label}}</text></g>
{{end}}{{if .Chart.CostLine}}<polyline class="cost" points="{{.Chart.CostLine}}"/>{{range .Chart.Bars}}<circle class="dot" cx="{{.CostX}}" cy="{{.CostY}}" r="3"/>{{end}}{{end}}
</svg>
<div class="legend"><span><i style="background:#8cb4e8"></i>input tokens</span><span><i style="background:#0969da"></i>output tokens</span><span><i style="background:#9a6700"></i>cost (max {{.Chart.MaxCost}})</span><span>tallest bar: {{.Chart.MaxTokens}} tokens</span></div>

<h2>Timeline</h2>
<ol class="timeline">
{{range .Rows}}<li class="timeline-row" id="iteration-{{.N}}" data-iteration="{{.N}}">
<div class="row-head">
<div><span class="n">{{$.Label}} {{.N}}</span>{{if .Step}}<span class="step">{{.Step}}</span>{{end}}</div>
<div class="track"><div class="bar" style="left:{{.Left}}%;width:{{.Width}}%"></div></div>
<div class="verdict {{.VerdictTone}}">{{with .Verdict}}{{.Result}}{{else}}{{if not .Finished}}cut short{{end}}{{end}}</div>
<div class="meta">{{.Meta}}</div>
</div>
{{if or .Prompt .PromptSource}}{{if .PromptIsRetry}}<details class="prompt"><summary>prompt: {{.PromptSource}} (the retry prompt of the iteration before)</summary><pre>{{.Prompt}}</pre></details>{{else}}<details class="prompt"><summary>prompt: {{.PromptSource}}</summary><pre>{{.Prompt}}</pre></details>{{end}}{{end}}
<ol class="steps">
{{range .Items}}<li class="entry kind-{{.Kind}}"><span class="at">{{.At}}</span><span class="mark tone-{{.Tone}}">{{.Mark}}</span>{{if eq .Kind "text"}}<span class="text">{{.Detail}}</span>{{else}}<span class="title">{{.Title}}</span>{{if .Dur}}<span class="dur">{{.Dur}}</span>{{end}}{{if .Detail}}<details><summary>{{.Summary}}</summary><pre>{{.Detail}}</pre></details>{{end}}{{end}}</li>
{{end}}</ol>
{{with .Verdict}}{{if .Result}}<p class="verdict-line">Verdict: <b>{{.Result}}</b>{{if .Reason}} — {{.Reason}}{{end}}</p>{{end}}{{end}}
</li>
{{end}}</ol>
{{if .Artifacts}}<h2>Artifacts</h2><ul>{{range .Artifacts}}<li><code>{{.Path}}</code> {{.Handle}} · {{.Bytes}} bytes</li>{{end}}</ul>{{end}}
{{if .Warnings}}<h2>Warnings</h2><ul>{{range .Warnings}}<li>{{.}}</li>{{end}}</ul>{{end}}
<footer>capstan run {{.Run.ID}} · generated by <code>capstan report</code> from the run journal</footer>
</main>
</body>
</html>
`))
