package event

// SkillEvidence is recorded for every tool call of a skill's Act run.
type SkillEvidence struct {
	Step         int       `json:"step"`
	Seq          int       `json:"seq"`
	Tool         string    `json:"tool"`
	OK           bool      `json:"ok"`
	ReasonShort  string    `json:"reason_short"`
	InputsDigest string    `json:"inputs_digest"`
	Cost         SkillCost `json:"cost"`
	DiffSummary  string    `json:"diff_summary,omitempty"`
	FileIDs      []string  `json:"file_ids,omitempty"`
	Disclosure   string    `json:"disclosure,omitempty"` // L2 / L3 when the call disclosed content
	Cached       bool      `json:"cached,omitempty"`     // answered from the read cache or AttemptMemo
	Error        string    `json:"error,omitempty"`
	// Stderr is a script's standard error, summarized to at most 512
	// lines (runScript only).
	Stderr string `json:"stderr,omitempty"`
}

// SkillCost is the tokens and time one step used.
type SkillCost struct {
	Tokens int64 `json:"tokens"`
	TimeMs int64 `json:"time_ms"`
}

// SkillReflectEvent is a re-plan note an Act run gave the model after
// steps without progress.
type SkillReflectEvent struct {
	Note string `json:"note"`
	Step int    `json:"step"`
}

// SkillActUpToDateEvent says an Act run's outputs were already up to
// date: nothing ran.
type SkillActUpToDateEvent struct {
	Skill string `json:"skill"`
}

// EventKind implements Payload.
func (SkillEvidence) EventKind() Kind { return KindSkillEvidence }

// EventKind implements Payload.
func (SkillReflectEvent) EventKind() Kind { return KindSkillReflect }

// EventKind implements Payload.
func (SkillActUpToDateEvent) EventKind() Kind { return KindSkillActUpToDate }
