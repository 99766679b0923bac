package standard

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/capstan-dev/capstan/internal/lazyre"
	"github.com/capstan-dev/capstan/pipeline"
)

// Intent types the rule-based detector knows.
const (
	IntentActivitySummary = "activity_summary"
	IntentQueryCommits    = "query_commits"
	IntentQueryAuthors    = "query_authors"
	IntentQueryChanges    = "query_changes"
)

var intentWords = map[string][]string{
	IntentActivitySummary: {"summarize", "summarise", "summary", "activity", "overview", "report", "happened", "progress", "digest"},
	IntentQueryCommits:    {"commit", "commits", "history", "log", "merged", "pushed"},
	IntentQueryAuthors:    {"who", "author", "authors", "contributor", "contributors", "people", "team"},
	IntentQueryChanges:    {"file", "files", "lines", "churn", "changed", "changes", "areas", "hotspots"},
}

var (
	wordRe = lazyre.New(`[a-z]+`)
	// lastNRe: "last 3 days", "past two weeks", "the last 6 months".
	lastNRe = lazyre.New(`\b(?:last|past|previous)\s+(\d{1,3}|a|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)\s+(hour|day|week|month|year)s?\b`)
	// lastOne: "last week", "this month", "past year".
	lastOne  = lazyre.New(`\b(?:last|past|this|previous)\s+(day|week|fortnight|month|quarter|year)\b`)
	sinceDay = lazyre.New(`\bsince\s+(\d{4}-\d{2}-\d{2})\b`)
	// timeWords mark a request that talks about a time window.
	timeWords = lazyre.New(`\b(?:hours?|days?|weeks?|fortnights?|months?|quarters?|years?|yesterday|today|since|ago)\b`)
)

var numberWords = map[string]string{"a": "1", "one": "1", "two": "2", "three": "3", "four": "4", "five": "5", "six": "6",
	"seven": "7", "eight": "8", "nine": "9", "ten": "10", "eleven": "11", "twelve": "12"}

// WindowFromText finds a time window in a request ("last 3 days", "past
// two weeks", "last month", "since 2026-11-01", "yesterday") and returns
// it as a --since value ("3d", "2w", "1m", "2026-11-01"); "" when the
// request names no window. A request that speaks of a time window in words
// it does not understand ("two weeks", "since Monday") is an error, never a
// silent default.
func WindowFromText(text string) (string, error) {
	t := strings.ToLower(text)
	if m := lastNRe().FindStringSubmatch(t); m != nil {
		n := m[1]
		if w, ok := numberWords[n]; ok {
			n = w
		}
		return n + map[string]string{"hour": "h", "day": "d", "week": "w", "month": "m", "year": "y"}[m[2]], nil
	}
	if m := lastOne().FindStringSubmatch(t); m != nil {
		return map[string]string{"day": "1d", "week": "7d", "fortnight": "14d", "month": "1m", "quarter": "3m", "year": "1y"}[m[1]], nil
	}
	if m := sinceDay().FindStringSubmatch(t); m != nil {
		return m[1], nil
	}
	switch {
	case strings.Contains(t, "yesterday"), strings.Contains(t, "today"):
		return "1d", nil
	}
	if m := timeWords().FindString(t); m != "" {
		return "", fmt.Errorf("the request speaks of a time window (%q) in words capstan does not understand: say \"last 3 days\", \"past 2 weeks\", \"last month\" or \"since YYYY-MM-DD\", or pass --since (e.g. 14d, 3m, 1y)", m)
	}
	return "", nil
}

// detectIntents scores intents by keywords in input.request.
func detectIntents(_ context.Context, ac *pipeline.AgentContext) error {
	req := ac.String(KeyRequest)
	score := map[string]float64{}
	for _, w := range wordRe().FindAllString(strings.ToLower(req), -1) {
		for intent, words := range intentWords {
			for _, kw := range words {
				if w == kw {
					score[intent] += 0.35
				}
			}
		}
	}
	var intents []Intent
	for intent, s := range score {
		intents = append(intents, Intent{Type: intent, Confidence: min(0.95, 0.5+s)})
	}
	sort.Slice(intents, func(i, j int) bool {
		if intents[i].Confidence != intents[j].Confidence {
			return intents[i].Confidence > intents[j].Confidence
		}
		return intents[i].Type < intents[j].Type
	})
	if len(intents) == 0 {
		// Nothing matched: this pipeline only knows how to summarize activity.
		intents = []Intent{{Type: IntentActivitySummary, Confidence: 0.3}}
	}
	entities := map[string]any{}
	if ac.String(KeySince) == "" {
		w, err := WindowFromText(req)
		if err != nil {
			return err
		}
		if w != "" {
			entities["time_window"] = w
		}
	}
	if err := ac.Set(KeyIntents, intents); err != nil {
		return err
	}
	return ac.Set(KeyEntities, entities)
}

var hypothesisText = map[string]string{
	IntentActivitySummary: "The commit history of the window shows how much and what kind of work was done",
	IntentQueryCommits:    "The commits of the window can be listed and counted",
	IntentQueryAuthors:    "The window's commits show who contributed and how much",
	IntentQueryChanges:    "The window's commits show which files and areas changed and by how many lines",
}

// buildHypotheses makes one hypothesis per intent and a comparison with the
// previous window that depends on the first.
func buildHypotheses(_ context.Context, ac *pipeline.AgentContext) error {
	var intents []Intent
	if err := ac.Decode(KeyIntents, &intents); err != nil {
		return err
	}
	var hs []Hypothesis
	for _, in := range intents {
		text, ok := hypothesisText[in.Type]
		if !ok {
			text = "The commit history of the window answers the request (" + in.Type + ")"
		}
		hs = append(hs, Hypothesis{ID: "h" + strconv.Itoa(len(hs)+1), Description: text, Intent: in.Type, Dependencies: []string{}})
	}
	hs = append(hs, Hypothesis{ID: "h" + strconv.Itoa(len(hs)+1), Description: "Activity in the window differs from the previous window of the same length",
		Intent: intents[0].Type, Dependencies: []string{"h1"}})
	return ac.Set(KeyHypotheses, hs)
}

// planRetrieval plans git log queries for the window and the one before.
func planRetrieval(_ context.Context, ac *pipeline.AgentContext) error {
	t, err := now(ac)
	if err != nil {
		return err
	}
	since := ac.String(KeySince)
	if since == "" {
		var ents map[string]any
		if ac.Decode(KeyEntities, &ents) == nil {
			if w, ok := ents["time_window"].(string); ok {
				since = w
			}
		}
	}
	if since == "" {
		since = "7d"
	}
	w, err := ParseSince(since, t)
	if err != nil {
		return err
	}
	repo := ac.String(KeyRepo)
	if repo == "" {
		repo = "."
	}
	var hs []Hypothesis
	if err := ac.Decode(KeyHypotheses, &hs); err != nil {
		return err
	}
	hids := make([]string, len(hs))
	for i, h := range hs {
		hids[i] = h.ID
	}
	q := func(id, role string, w Window) Query {
		return Query{ID: id, Source: "git", Repo: repo, Role: role, Window: w,
			QueryString: "git " + strings.Join(LogArgs(repo, w), " ")}
	}
	queries := []Query{q("q1", "current", w), q("q2", "previous", w.Previous())}
	plans := []RetrievalPlan{{ID: "plan-1", Description: "Read the commit history of " + repo + " for " + w.String() + " and the window before it",
		Sources: []string{"git"}, Priority: 1, Queries: []string{"q1", "q2"}, Hypotheses: hids}}
	if err := ac.Set(KeyPlans, plans); err != nil {
		return err
	}
	return ac.Set(KeyQueries, queries)
}

// executeRetrieval runs each git query.
func executeRetrieval(ctx context.Context, ac *pipeline.AgentContext) error {
	var qs []Query
	if err := ac.Decode(KeyQueries, &qs); err != nil {
		return err
	}
	var arts []Artifact
	for _, q := range qs {
		if q.Source != "git" {
			return fmt.Errorf("query %s: unknown source %q (this executor reads git)", q.ID, q.Source)
		}
		cs, err := Log(ctx, q.Repo, q.Window)
		if err != nil {
			return err
		}
		if cs == nil {
			cs = []Commit{}
		}
		arts = append(arts, Artifact{ID: "a" + strconv.Itoa(len(arts)+1), QueryID: q.ID, Type: "git_log", Source: "git",
			Role: q.Role, Window: q.Window, Commits: cs})
	}
	return ac.Set(KeyArtifacts, arts)
}

// synthesize turns artifacts into facts and derived knowledge.
func synthesize(_ context.Context, ac *pipeline.AgentContext) error {
	var arts []Artifact
	if err := ac.Decode(KeyArtifacts, &arts); err != nil {
		return fmt.Errorf("no retrieval artifacts to synthesize (is the %s stage in the pipeline?): %w", RetrievalExecutor, err)
	}
	var cur, prev *Artifact
	for i := range arts {
		switch arts[i].Role {
		case "current":
			cur = &arts[i]
		case "previous":
			prev = &arts[i]
		}
	}
	if cur == nil {
		return fmt.Errorf("no artifact for the current window")
	}
	if prev == nil {
		prev = &Artifact{Window: cur.Window.Previous()}
	}
	facts := Facts(cur.Commits, cur.Window, prev.Commits, prev.Window)
	if err := ac.Set(KeyFacts, facts); err != nil {
		return err
	}
	return ac.Set(KeyDerived, derive(facts))
}

func byKind(facts []Fact) map[string][]Fact {
	m := map[string][]Fact{}
	for _, f := range facts {
		m[f.Kind] = append(m[f.Kind], f)
	}
	return m
}

func num(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// pl renders a fact value with its noun: "1 commit", "6 commits".
func pl(v float64, noun string) string {
	if v == 1 {
		return "1 " + noun
	}
	return num(v) + " " + noun + "s"
}

// label is the subject of a per-author, per-type or per-area fact.
func label(f Fact) string {
	s := f.Content
	switch f.Kind {
	case KindAuthorCommits:
		if i := strings.Index(s, " <"); i >= 0 {
			return s[:i]
		}
	case KindTypeCommits:
		s = strings.TrimPrefix(s, "type ")
	case KindAreaChanges:
		s = strings.TrimPrefix(s, "area ")
	}
	if i := strings.LastIndex(s, ": "); i >= 0 {
		return s[:i]
	}
	return s
}

// leaders returns the facts of kind sharing the highest value.
func leaders(fs []Fact) []Fact {
	if len(fs) == 0 || fs[0].Value == 0 {
		return nil
	}
	var out []Fact
	for _, f := range fs {
		if f.Value == fs[0].Value {
			out = append(out, f)
		}
	}
	return out
}

func each(fs []Fact) string {
	if len(fs) > 1 {
		return " each"
	}
	return ""
}

func ids(fs ...Fact) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.ID
	}
	return out
}

func labels(fs []Fact) string {
	ls := make([]string, len(fs))
	for i, f := range fs {
		ls[i] = label(f)
	}
	return strings.Join(ls, " and ")
}

func derive(facts []Fact) []Derived {
	k := byKind(facts)
	out := []Derived{}
	add := func(content string, based ...Fact) {
		out = append(out, Derived{ID: "D" + strconv.Itoa(len(out)+1), Content: content, BasedOn: ids(based...)})
	}
	total := k[KindCommits][0]
	if total.Value == 0 {
		return out
	}
	if l := leaders(k[KindTypeCommits]); len(l) > 0 {
		add(fmt.Sprintf("most common change type: %s (%s of %s commits)", labels(l), num(l[0].Value), num(total.Value)), append(l, total)...)
	}
	if l := leaders(k[KindAuthorCommits]); len(l) > 0 {
		add(fmt.Sprintf("most active: %s (%s of %s commits)", labels(l), num(l[0].Value), num(total.Value)), append(l, total)...)
	}
	if a := k[KindAreaChanges]; len(a) > 0 {
		add(fmt.Sprintf("busiest area: %s (%s file changes)", label(a[0]), num(a[0].Value)), a[0])
	}
	return out
}

// infer draws conclusions from the facts, each citing its evidence.
func infer(_ context.Context, ac *pipeline.AgentContext) error {
	var facts []Fact
	if err := ac.Decode(KeyFacts, &facts); err != nil {
		return err
	}
	var hs []Hypothesis
	if err := ac.Decode(KeyHypotheses, &hs); err != nil {
		return err
	}
	k := byKind(facts)
	if len(k[KindCommits]) == 0 || len(k[KindPreviousCommits]) == 0 {
		return fmt.Errorf("facts lack the commit counts")
	}
	total, prev := k[KindCommits][0], k[KindPreviousCommits][0]
	var cs []Conclusion
	var chain []InferenceStep
	add := func(text, rule string, hyp string, ev ...Fact) {
		c := Conclusion{ID: "c" + strconv.Itoa(len(cs)+1), Description: text, Confidence: 1, Evidence: ids(ev...)}
		cs = append(cs, c)
		chain = append(chain, InferenceStep{Step: len(chain) + 1, From: append([]string{hyp}, c.Evidence...), Conclusion: c.ID, Rule: rule})
	}
	h1, h2 := hs[0].ID, hs[len(hs)-1].ID
	if total.Value == 0 {
		add("No commits were made in the window", "count", h1, total)
	} else {
		authors := k[KindAuthors][0]
		add(fmt.Sprintf("%s by %s %s made in the window", pl(total.Value, "commit"), pl(authors.Value, "author"), map[bool]string{true: "was", false: "were"}[total.Value == 1]), "count", h1, total, authors)
		if l := leaders(k[KindTypeCommits]); len(l) > 0 {
			verb := "was the most common change type"
			if len(l) > 1 {
				verb = "were the most common change types"
			}
			add(fmt.Sprintf("%s %s, with %s of %s commits%s", labels(l), verb, num(l[0].Value), num(total.Value), each(l)), "plurality", h1, append(l, total)...)
		}
		if l := leaders(k[KindAuthorCommits]); len(l) > 0 && len(k[KindAuthorCommits]) > 1 {
			add(fmt.Sprintf("%s led with %s of %s commits%s", labels(l), num(l[0].Value), num(total.Value), each(l)), "plurality", h1, append(l, total)...)
		}
		if a := k[KindAreaChanges]; len(a) > 0 {
			add(fmt.Sprintf("Most file changes were in %s (%s)", label(a[0]), num(a[0].Value)), "plurality", h1, a[0])
		}
	}
	switch {
	case total.Value > prev.Value:
		add(fmt.Sprintf("Activity rose from %s to %s compared with the previous window", num(prev.Value), pl(total.Value, "commit")), "compare", h2, prev, total)
	case total.Value < prev.Value:
		add(fmt.Sprintf("Activity fell from %s to %s compared with the previous window", num(prev.Value), pl(total.Value, "commit")), "compare", h2, prev, total)
	default:
		add(fmt.Sprintf("Activity was flat: %s in both windows", pl(total.Value, "commit")), "compare", h2, prev, total)
	}
	if err := ac.Set(KeyConclusions, cs); err != nil {
		return err
	}
	return ac.Set(KeyInferenceChain, chain)
}

// summarize renders the facts and conclusions as a short report whose
// every number cites a fact.
func summarize(_ context.Context, ac *pipeline.AgentContext) error {
	var facts []Fact
	if err := ac.Decode(KeyFacts, &facts); err != nil {
		return err
	}
	var cs []Conclusion
	if err := ac.Decode(KeyConclusions, &cs); err != nil {
		return err
	}
	return ac.Set(KeySummary, RenderSummary(facts, cs))
}

// RenderSummary is the rule-based summary of facts and conclusions.
func RenderSummary(facts []Fact, cs []Conclusion) string {
	k := byKind(facts)
	cite := func(fs ...Fact) string { return " [" + strings.Join(ids(fs...), ", ") + "]" }
	var b strings.Builder
	total := k[KindCommits][0]
	if total.Window != nil {
		fmt.Fprintf(&b, "Development activity from %s to %s UTC\n",
			total.Window.Since.UTC().Format("2006-01-02 15:04"), total.Window.Until.UTC().Format("2006-01-02 15:04"))
	} else {
		b.WriteString("Development activity\n")
	}
	authors := k[KindAuthors][0]
	fmt.Fprintf(&b, "- %s by %s%s\n", pl(total.Value, "commit"), pl(authors.Value, "author"), cite(total, authors))
	if total.Value > 0 {
		files, add, del := k[KindFiles][0], k[KindLinesAdded][0], k[KindLinesDeleted][0]
		fmt.Fprintf(&b, "- %s changed, %s added, %s deleted%s\n", pl(files.Value, "file"), pl(add.Value, "line"), num(del.Value), cite(files, add, del))
		list := func(title string, fs []Fact) {
			if len(fs) == 0 {
				return
			}
			parts := make([]string, len(fs))
			for i, f := range fs {
				parts[i] = label(f) + " " + num(f.Value)
			}
			fmt.Fprintf(&b, "- %s: %s%s\n", title, strings.Join(parts, ", "), cite(fs...))
		}
		list("By type", k[KindTypeCommits])
		list("By author", k[KindAuthorCommits])
		list("Busiest areas (file changes)", k[KindAreaChanges])
	}
	prev := k[KindPreviousCommits][0]
	fmt.Fprintf(&b, "- Previous window: %s%s\n", pl(prev.Value, "commit"), cite(prev))
	if len(cs) > 0 {
		b.WriteString("Conclusions:\n")
		for _, c := range cs {
			fmt.Fprintf(&b, "- %s [%s]\n", c.Description, strings.Join(c.Evidence, ", "))
		}
	}
	return strings.TrimRight(b.String(), "\n")
}

// validate checks intents, conclusions and the summary against the facts.
func validate(_ context.Context, ac *pipeline.AgentContext) error {
	t, err := now(ac)
	if err != nil {
		return err
	}
	rep := ValidationReport{AgentID: Validation, Violations: []string{}, UnbackedNumbers: []string{}, Timestamp: t}
	var intents []Intent
	if err := ac.Decode(KeyIntents, &intents); err != nil {
		return err
	}
	rep.Checks = append(rep.Checks, "intents")
	for _, in := range intents {
		if in.Type == "" || in.Confidence < 0 || in.Confidence > 1 {
			rep.Violations = append(rep.Violations, fmt.Sprintf("intent %q has confidence %v outside [0,1] or no type", in.Type, in.Confidence))
		}
	}
	var cs []Conclusion
	if err := ac.Decode(KeyConclusions, &cs); err != nil {
		return err
	}
	var facts []Fact
	haveFacts := ac.Decode(KeyFacts, &facts) == nil
	byID := map[string]Fact{}
	var all []float64
	for _, f := range facts {
		byID[f.ID] = f
		all = append(all, f.Value)
	}
	rep.Checks = append(rep.Checks, "conclusion evidence")
	for _, c := range cs {
		if len(c.Evidence) == 0 {
			rep.Violations = append(rep.Violations, fmt.Sprintf("conclusion %s cites no evidence", c.ID))
		}
		if !haveFacts {
			continue
		}
		var vals []float64
		for _, id := range c.Evidence {
			f, ok := byID[id]
			if !ok {
				rep.Violations = append(rep.Violations, fmt.Sprintf("conclusion %s cites unknown fact %s", c.ID, id))
				continue
			}
			vals = append(vals, f.Value)
		}
		for _, n := range Numbers(c.Description) {
			if !Backed(n, vals) {
				rep.UnbackedNumbers = append(rep.UnbackedNumbers, fmt.Sprintf("conclusion %s: %s", c.ID, n.Text))
			}
		}
	}
	if haveFacts {
		rep.Checks = append(rep.Checks, "numbers backed by facts")
		if summary := ac.String(KeySummary); summary != "" {
			rep.Checks = append(rep.Checks, "summary numbers")
			for _, n := range Numbers(summary) {
				if !Backed(n, all) {
					rep.UnbackedNumbers = append(rep.UnbackedNumbers, "summary: "+n.Text)
				}
			}
			for _, id := range factRefRe().FindAllString(summary, -1) {
				if _, ok := byID[id]; !ok {
					rep.Violations = append(rep.Violations, "summary cites unknown fact "+id)
				}
			}
		}
	} else {
		rep.Violations = append(rep.Violations, "no facts to check numbers against")
	}
	for _, u := range rep.UnbackedNumbers {
		rep.Violations = append(rep.Violations, "number not backed by a cited fact: "+u)
	}
	rep.Passed = len(rep.Violations) == 0
	return ac.Set(KeyValidationReport, []ValidationReport{rep})
}

var factRefRe = lazyre.New(`\bF\d+\b`)
