package runreport

import (
	"io"
	"strings"

	"github.com/capstan-dev/capstan/internal/lazyre"
)

// WriteMarkdown writes the account as GitHub-flavoured Markdown, for a
// pull request comment or a CI job summary ($GITHUB_STEP_SUMMARY). Long
// texts (prompts, tool outputs, retry prompts) fold into <details>. Text
// the model or a tool produced is escaped or fenced, so it cannot break
// the page's structure.
func WriteMarkdown(w io.Writer, r *Run, opts Options) error {
	its, err := r.Select(opts)
	if err != nil {
		return err
	}
	p := &printer{w: w}
	icon := map[string]string{"COMPLETED": "✅", "NOT COMPLETED": "❌", "UNFINISHED": "⏸️"}[r.outcomeStatus()]
	if r.Unverified {
		icon = "⚠️"
		p.f("> **%s**\n\n", Unverified)
	}
	name := r.Agent
	if r.Skill != "" {
		name = "skill " + r.Skill
	}
	if pl := r.Pipeline; pl != nil {
		p.f("### %s pipeline %s: %s\n\n", icon, mdText(pl.Name()), r.Status())
		writeStagesMarkdown(p, r)
		return p.err
	}
	p.f("### %s %s: %s\n\n", icon, mdText(name), r.Status())
	if r.PipelineRun != "" {
		p.f("A stage of pipeline run `%s` (`capstan show %s`).\n\n", mdCode(r.PipelineRun), mdCode(r.PipelineRun))
	}
	p.f("| run | model | iterations | tokens | cost | duration |\n|---|---|---|---|---|---|\n")
	if o := r.Outcome; o != nil {
		p.f("| `%s` | `%s` | %d | %s | $%.4f | %s |\n\n", mdCode(r.ID), mdCode(r.Model), o.Iterations, usageText(o.Usage), o.CostUSD, DurationText(o.Duration, o.TestBaseline))
		if note := o.UsageNote(); note != "" {
			p.f("*%s*\n\n", mdText(note))
		}
		if o.Reason != "" {
			p.f("**%s** — %s\n\n", mdText(o.CompletionReason), mdText(o.Reason))
		}
		if o.ErrorCode != "" || o.ErrorMessage != "" {
			p.f("**Error** `%s`: %s\n\n", mdCode(o.ErrorCode), mdText(o.ErrorMessage))
		}
	} else {
		p.f("| `%s` | `%s` | %d | | | |\n\n", mdCode(r.ID), mdCode(r.Model), len(r.Iterations))
	}
	label := "Iteration"
	if r.Skill != "" {
		label = "Turn"
	}
	for _, it := range its {
		p.markdownIteration(r, it, label, opts)
	}
	if len(r.Artifacts) > 0 {
		p.f("**Artifacts:** ")
		for i, a := range r.Artifacts {
			if i > 0 {
				p.f(", ")
			}
			p.f("`%s` (%d bytes)", mdCode(a.Path), a.Bytes)
		}
		p.f("\n\n")
	}
	for _, b := range r.TestBaselines {
		p.f("> tests %s\n", mdText(BaselineSummary(b)))
	}
	for _, h := range r.HiddenBaselines {
		p.f("> %s\n", mdText(HiddenSummary(h)))
	}
	for _, warn := range r.Warnings {
		p.f("> warning: %s\n", mdText(warn))
	}
	return p.err
}

// markdownIteration writes one iteration (or skill turn): its heading,
// prompt, entries, verdict and usage.
func (p *printer) markdownIteration(r *Run, it Iteration, label string, opts Options) {
	p.f("#### %s %d", label, it.N)
	if it.Step != "" {
		p.f(" · step `%s`", mdCode(it.Step))
	}
	if v := it.Verdict; v != nil && v.Result != "" {
		p.f(" · %s", v.Result)
	}
	p.f("\n\n")
	if it.PromptSource != "" || it.Prompt != "" {
		if r.retryBefore(it) != nil {
			p.f("- prompt: `%s` (the retry prompt of iteration %d)\n", mdCode(it.PromptSource), it.N-1)
		} else {
			p.f("- prompt: `%s`", mdCode(it.PromptSource))
			p.details("prompt", clip(it.Prompt, opts.Full))
		}
	}
	for _, e := range it.Entries {
		at := ""
		if !e.Time.IsZero() && !it.Started.IsZero() {
			at = "`+" + FormatDuration(e.Time.Sub(it.Started)) + "` "
		}
		switch e.Kind {
		case KindText:
			p.f("- %s**model:** %s\n", at, strings.ReplaceAll(mdText(strings.TrimSpace(e.Detail)), "\n", "<br>"))
		default:
			title := mdText(e.Title)
			if e.Kind == KindTool || e.Kind == KindDenied {
				title = "`" + mdCode(e.Title) + "`"
			}
			p.f("- %s%s %s%s", at, mdMark(e), title, durationSuffix(e.Duration))
			if d := strings.TrimSpace(e.Detail); e.Kind != KindTool && len(d) <= 200 && !strings.Contains(d, "\n") {
				if d != "" {
					p.f(" — %s", mdText(d))
				}
				p.f("\n")
				continue
			}
			summary := map[string]string{KindTool: "output", KindRetry: "retry prompt", KindDenied: "reason", KindValidator: "output"}[e.Kind]
			if summary == "" {
				summary = "details"
			}
			detail := e.Detail
			switch e.Kind {
			case KindValidator:
				detail = tail(detail, e.Omitted, opts.Full)
			case KindRetry:
			default:
				detail = clip(detail, opts.Full) // a PR comment has a size limit
			}
			p.details(summary, detail)
		}
	}
	if v := it.Verdict; v != nil && v.Result != "" {
		p.f("\n**Verdict:** %s", v.Result)
		if v.Reason != "" {
			p.f(" — %s", mdText(v.Reason))
		}
		p.f("\n")
	}
	p.f("\n%s", metaLine(it))
	if !it.Finished {
		p.f(" · cut short")
	}
	p.f("\n\n")
}

func metaLine(it Iteration) string { return "<sub>" + metaText(it) + "</sub>" }

func mdMark(e Entry) string {
	switch e.Kind {
	case KindTool:
		if e.OK {
			return "🔧"
		}
		return "🔧 ❌"
	case KindDenied:
		return "⛔ denied"
	case KindValidator:
		if e.OK {
			return "✅"
		}
		return "❌"
	case KindCheck:
		return "🏁"
	case KindRetry:
		return "↩️"
	case KindTransition:
		return "➡️"
	case KindError:
		return "⚠️ error"
	}
	return "•"
}

// details writes s folded under summary, in a fence longer than any run of
// backticks in s.
func (p *printer) details(summary, s string) {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		p.f("\n")
		return
	}
	fence := "```"
	for strings.Contains(s, fence) {
		fence += "`"
	}
	p.f("\n  <details><summary>%s</summary>\n\n  %s\n  %s\n  %s\n\n  </details>\n", summary, fence, strings.ReplaceAll(s, "\n", "\n  "), fence)
}

var mdSpecial = lazyre.New("[\\\\`*_{}\\[\\]<>#|!~]")

// mdText escapes text so Markdown and HTML in it show literally.
func mdText(s string) string {
	s = strings.ReplaceAll(s, "&", "&amp;")
	return mdSpecial().ReplaceAllStringFunc(s, func(c string) string {
		switch c {
		case "<":
			return "&lt;"
		case ">":
			return "&gt;"
		}
		return "\\" + c
	})
}

// mdCode makes s safe inside a one-backtick code span.
func mdCode(s string) string {
	return strings.NewReplacer("`", "'", "\n", " ").Replace(s)
}

// writeStagesMarkdown is the Markdown account of a pipeline run: the run,
// its request and model, each stage's outcome, the agent stages' runs.
func writeStagesMarkdown(p *printer, r *Run) {
	pl := r.Pipeline
	duration := ""
	if o := r.Outcome; o != nil {
		duration = FormatDuration(o.Duration)
	}
	p.f("| run | model | stages | duration |\n|---|---|---|---|\n")
	p.f("| `%s` | `%s` | %d | %s |\n\n", mdCode(r.ID), mdCode(r.modelName()), len(pl.Stages), duration)
	p.f("**Request:** %s\n\n", mdText(pl.Request))
	if o := r.Outcome; o != nil && o.ErrorMessage != "" {
		p.f("**Error** `%s`: %s\n\n", mdCode(o.ErrorCode), mdText(o.ErrorMessage))
	}
	for _, st := range pl.Stages {
		m := "✅"
		if !st.OK() {
			m = "❌"
		}
		p.f("- %s `%s` %s\n", m, mdCode(st.ID), mdText(st.Summary()))
		if st.Error != "" {
			p.f("  - error: %s\n", mdText(st.Error))
		}
		for _, v := range st.Violations {
			p.f("  - violation: %s\n", mdText(v))
		}
	}
	for _, a := range pl.AgentRuns {
		p.f("- agent `%s`: run `%s` %s\n", mdCode(a.Dir), mdCode(a.RunID), mdText(a.outcome()))
	}
	p.f("\n")
}
