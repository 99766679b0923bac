package skill

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

func BenchmarkParse(b *testing.B) {
	data := []byte("---\nname: bench\ndescription: \"A skill used by the benchmark: parses, warns\"\nlicense: Apache-2.0\nmetadata:\n  version: \"1\"\n---\n" + strings.Repeat("Some instructions with a [link](ref.md) and `scripts/run.py`.\n", 200))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := Parse(data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDiscover(b *testing.B) {
	dir := b.TempDir()
	files := map[string]string{}
	for i := 0; i < 50; i++ {
		files[fmt.Sprintf("group%d/skill-%d/SKILL.md", i%5, i)] = fmt.Sprintf("---\nname: skill-%d\ndescription: Skill number %d.\n---\nRead [notes](notes.md).\n", i, i)
		files[fmt.Sprintf("group%d/skill-%d/notes.md", i%5, i)] = "# notes\n"
	}
	writeTree(b, dir, files)
	b.ReportAllocs()
	for b.Loop() {
		skills, _ := Discover(dir)
		if len(skills) != 50 {
			b.Fatal(len(skills))
		}
	}
}

// BenchmarkActRun measures one full Act run of the example skill (three
// model turns, four tools, validation) without scripts.
func BenchmarkActRun(b *testing.B) {
	sk := exampleSkill(b)
	b.ReportAllocs()
	for b.Loop() {
		res, err := New(Config{Model: &playModel{turns: happyTurns()}}).Run(context.Background(), sk, Input{Goal: "bench", Expected: expectReport, Fresh: true})
		if err != nil || !res.Completed {
			b.Fatal(err, res.ExitReason)
		}
	}
}
