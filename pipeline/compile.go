package pipeline

import (
	"fmt"
	"sort"
	"strings"
)

// Plan is a checked pipeline: stages in a topological order with their
// effective dependencies, and the groups of stages that may start together.
type Plan struct {
	// Stages are in a topological order (registration order among stages
	// that are ready at the same time).
	Stages []PlanStage `json:"stages"`
	// Levels groups stage ids by depth: every stage of a level depends
	// only on stages of earlier levels, so a level's stages may run in
	// parallel.
	Levels [][]string `json:"levels"`

	defs       []*stageDef // by registration index
	order      []int       // topological order of registration indexes
	pos        []int       // registration index -> position in order
	deps       [][]int
	dependents [][]int
	rules      map[string]keyRule
}

// PlanStage is one stage of a Plan.
type PlanStage struct {
	ID        string   `json:"id"`
	DependsOn []string `json:"depends_on,omitempty"`
}

// Compile checks the registered pipeline against the given input keys
// (keys present in the context passed to Execute) without running
// anything. It reports, all at once, with the stages and keys named:
// unknown dependencies, preconditions produced by no earlier stage or
// input, cycles, two stages that may run concurrently and write the same
// key (without a reducer), and conflicting key declarations.
func (m *Manager) Compile(inputKeys ...string) (*Plan, error) {
	m.mu.Lock()
	defs := append([]*stageDef(nil), m.stages...)
	cfg := m.cfg
	m.mu.Unlock()
	return compile(defs, cfg.Keys, inputKeys)
}

func compile(defs []*stageDef, declared []KeySpec, inputKeys []string) (*Plan, error) {
	c := &planCompiler{defs: defs, specs: map[string]KeySpec{}, owner: map[string]string{}, rules: map[string]keyRule{}, producers: map[string][]int{}}
	// Key rules: config declarations, then the agents' own.
	for _, ks := range declared {
		if err := CheckKey(ks.Name); err != nil {
			c.probs = append(c.probs, Problem{Keys: []string{ks.Name}, Message: fmt.Sprintf("declared key: %v", err)})
			continue
		}
		c.addSpec(ks, "")
	}
	for _, d := range defs {
		for _, ks := range d.keys {
			c.addSpec(ks, d.id)
		}
	}
	for i, d := range defs {
		for _, k := range d.post {
			c.producers[k] = append(c.producers[k], i)
			c.ruleFor(k)
		}
	}
	deps := c.edges(inputKeys)
	p := &Plan{defs: defs, rules: c.rules}
	depth, indeg := p.sortStages(deps)
	if len(p.order) < len(defs) {
		c.probs = append(c.probs, cycleProblem(defs, deps, indeg))
		return nil, compileErr(c.probs...)
	}
	c.concurrentWriters(p)
	if len(c.probs) > 0 {
		return nil, compileErr(c.probs...)
	}
	p.levels(depth)
	return p, nil
}

// planCompiler holds what compile gathers about the stages: the key rules,
// who declared each key, which stages write each key, and the problems found.
type planCompiler struct {
	defs      []*stageDef
	probs     []Problem
	specs     map[string]KeySpec
	owner     map[string]string
	rules     map[string]keyRule
	producers map[string][]int
}

// addSpec adds a key's declaration by who (a stage id, or "" for the
// config): a declaration with an unknown type or reducer, or one that
// differs from an earlier one, is a problem.
func (c *planCompiler) addSpec(ks KeySpec, who string) {
	if !ks.Type.valid() {
		c.probs = append(c.probs, Problem{Stages: stagesOf(who), Keys: []string{ks.Name}, Message: fmt.Sprintf("key %s: unknown type %q (want array, object, string, number, boolean or empty for any)", ks.Name, ks.Type)})
		return
	}
	if !ks.Reducer.valid() {
		c.probs = append(c.probs, Problem{Stages: stagesOf(who), Keys: []string{ks.Name}, Message: fmt.Sprintf("key %s: unknown reducer %q (want append or merge)", ks.Name, ks.Reducer)})
		return
	}
	if (ks.Reducer == ReduceAppend && ks.Type != TypeArray && ks.Type != TypeAny) ||
		(ks.Reducer == ReduceMerge && ks.Type != TypeObject && ks.Type != TypeAny) {
		c.probs = append(c.probs, Problem{Stages: stagesOf(who), Keys: []string{ks.Name}, Message: fmt.Sprintf("key %s: reducer %s does not fit type %s", ks.Name, ks.Reducer, ks.Type)})
		return
	}
	if prev, ok := c.specs[ks.Name]; ok {
		if !sameSpec(prev, ks) {
			c.probs = append(c.probs, Problem{Stages: append(stagesOf(c.owner[ks.Name]), stagesOf(who)...), Keys: []string{ks.Name},
				Message: fmt.Sprintf("key %s is declared differently by %s and %s", ks.Name, describeOwner(c.owner[ks.Name]), describeOwner(who))})
		}
		return
	}
	c.specs[ks.Name] = ks
	c.owner[ks.Name] = who
}

// ruleFor is the rule of key k (its declaration and compiled schema),
// compiled on first use.
func (c *planCompiler) ruleFor(k string) keyRule {
	if r, ok := c.rules[k]; ok {
		return r
	}
	spec, ok := c.specs[k]
	if !ok {
		spec = KeySpec{Name: k}
	}
	r := keyRule{spec: spec}
	if s, err := compileKeySchema(spec); err != nil {
		c.probs = append(c.probs, Problem{Stages: stagesOf(c.owner[k]), Keys: []string{k}, Message: fmt.Sprintf("key %s: %v", k, err)})
	} else {
		r.schema = s
	}
	c.rules[k] = r
	return r
}

// edges are the dependencies between stages, each with its reasons (for
// cycle messages): depends_on, and the keys a stage reads that others write.
func (c *planCompiler) edges(inputKeys []string) []map[int][]string {
	defs := c.defs
	byID := make(map[string]int, len(defs))
	for i, d := range defs {
		byID[d.id] = i
	}
	inputs := map[string]bool{}
	for _, k := range inputKeys {
		inputs[k] = true
	}
	deps := make([]map[int][]string, len(defs))
	for i := range deps {
		deps[i] = map[int][]string{}
	}
	for i, d := range defs {
		for _, dep := range d.cfg.DependsOn {
			j, ok := byID[dep]
			switch {
			case !ok:
				c.probs = append(c.probs, Problem{Stages: []string{d.id}, Message: fmt.Sprintf("stage %s depends on unknown stage %q", d.id, dep)})
			case j == i:
				c.probs = append(c.probs, Problem{Stages: []string{d.id}, Message: fmt.Sprintf("stage %s depends on itself", d.id)})
			default:
				deps[i][j] = append(deps[i][j], "depends_on")
			}
		}
		for _, k := range d.pre {
			c.ruleFor(k)
			found := false
			for _, p := range c.producers[k] {
				if p != i {
					deps[i][p] = append(deps[i][p], k)
					found = true
				}
			}
			if !found && !inputs[k] {
				c.probs = append(c.probs, Problem{Stages: []string{d.id}, Keys: []string{k},
					Message: fmt.Sprintf("stage %s: precondition %s is produced by no earlier stage or input", d.id, k)})
			}
		}
		for _, k := range d.opt {
			for _, p := range c.producers[k] {
				if p != i {
					deps[i][p] = append(deps[i][p], k)
				}
			}
		}
	}
	return deps
}

// sortStages sets the plan's dependencies and its run order (Kahn's algorithm,
// stable by registration order); it returns each stage's depth and, for a
// cycle, the stages left with unmet dependencies.
func (p *Plan) sortStages(deps []map[int][]string) (depth, indeg []int) {
	n := len(deps)
	p.deps, p.dependents, p.pos = make([][]int, n), make([][]int, n), make([]int, n)
	for i := range deps {
		for j := range deps[i] {
			p.deps[i] = append(p.deps[i], j)
			p.dependents[j] = append(p.dependents[j], i)
		}
		sort.Ints(p.deps[i])
	}
	for i := range p.dependents {
		sort.Ints(p.dependents[i])
	}
	indeg = make([]int, n)
	for i := range p.deps {
		indeg[i] = len(p.deps[i])
	}
	depth = make([]int, n)
	var ready []int
	for i := 0; i < n; i++ {
		if indeg[i] == 0 {
			ready = append(ready, i)
		}
	}
	for len(ready) > 0 {
		sort.Ints(ready)
		i := ready[0]
		ready = ready[1:]
		p.pos[i] = len(p.order)
		p.order = append(p.order, i)
		for _, d := range p.dependents[i] {
			if depth[i]+1 > depth[d] {
				depth[d] = depth[i] + 1
			}
			indeg[d]--
			if indeg[d] == 0 {
				ready = append(ready, d)
			}
		}
	}
	return depth, indeg
}

// concurrentWriters reports two stages that may run at the same time and
// both write a key without a reducer.
func (c *planCompiler) concurrentWriters(p *Plan) {
	n, defs := len(c.defs), c.defs
	reach := make([][]bool, n) // reach[a][b]: a runs before b
	for i := range reach {
		reach[i] = make([]bool, n)
	}
	for _, i := range p.order {
		for _, d := range p.deps[i] {
			reach[d][i] = true
			for a := 0; a < n; a++ {
				if reach[a][d] {
					reach[a][i] = true
				}
			}
		}
	}
	keys := make([]string, 0, len(c.producers))
	for k := range c.producers {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		ps := c.producers[k]
		if len(ps) < 2 || c.ruleFor(k).spec.Reducer != ReduceNone {
			continue
		}
		for x := 0; x < len(ps); x++ {
			for y := x + 1; y < len(ps); y++ {
				a, b := ps[x], ps[y]
				if !reach[a][b] && !reach[b][a] {
					c.probs = append(c.probs, Problem{Stages: []string{defs[a].id, defs[b].id}, Keys: []string{k},
						Message: fmt.Sprintf("stages %s and %s may run concurrently and both write %s (order them with depends_on, or declare the key with a reducer)", defs[a].id, defs[b].id, k)})
				}
			}
		}
	}
}

// levels sets the plan's stages in run order and groups them by depth.
func (p *Plan) levels(depth []int) {
	maxDepth := 0
	for _, d := range depth {
		maxDepth = max(maxDepth, d)
	}
	if len(p.defs) > 0 {
		p.Levels = make([][]string, maxDepth+1)
	}
	for _, i := range p.order {
		ps := PlanStage{ID: p.defs[i].id}
		for _, d := range p.deps[i] {
			ps.DependsOn = append(ps.DependsOn, p.defs[d].id)
		}
		p.Stages = append(p.Stages, ps)
		p.Levels[depth[i]] = append(p.Levels[depth[i]], p.defs[i].id)
	}
}

func stagesOf(id string) []string {
	if id == "" {
		return nil
	}
	return []string{id}
}

func describeOwner(id string) string {
	if id == "" {
		return "the pipeline configuration"
	}
	return "stage " + id
}

// cycleProblem names one cycle among the stages left with unmet
// dependencies, with the keys (or depends_on) linking each pair.
func cycleProblem(defs []*stageDef, deps []map[int][]string, indeg []int) Problem {
	left := map[int]bool{}
	for i, d := range indeg {
		if d > 0 {
			left[i] = true
		}
	}
	// Walk dependencies among the remaining stages until one repeats.
	start := -1
	for i := range defs {
		if left[i] {
			start = i
			break
		}
	}
	seen := map[int]int{}
	var path []int
	cur := start
	for {
		if at, ok := seen[cur]; ok {
			path = path[at:]
			break
		}
		seen[cur] = len(path)
		path = append(path, cur)
		next := -1
		var cand []int
		for j := range deps[cur] {
			if left[j] {
				cand = append(cand, j)
			}
		}
		sort.Ints(cand)
		if len(cand) > 0 {
			next = cand[0]
		}
		if next < 0 { // cannot happen: a stage left over has a left-over dependency
			break
		}
		cur = next
	}
	// path lists a stage followed by one it depends on; print it in run
	// order, starting from the earliest registered stage.
	ro := make([]int, 0, len(path))
	for x := len(path) - 1; x >= 0; x-- {
		ro = append(ro, path[x])
	}
	low := 0
	for x := range ro {
		if ro[x] < ro[low] {
			low = x
		}
	}
	ro = append(ro[low:], ro[:low]...)
	var b strings.Builder
	ids := []string{}
	keySet := map[string]bool{}
	for x, i := range ro {
		next := ro[(x+1)%len(ro)]
		ids = append(ids, defs[i].id)
		reasons := deps[next][i]
		fmt.Fprintf(&b, "%s [%s] -> ", defs[i].id, strings.Join(reasons, ", "))
		for _, r := range reasons {
			if r != "depends_on" {
				keySet[r] = true
			}
		}
	}
	b.WriteString(defs[ro[0]].id)
	var keys []string
	for k := range keySet {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return Problem{Stages: ids, Keys: keys, Message: "stages form a cycle: " + b.String()}
}
