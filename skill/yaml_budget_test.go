package skill

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/internal/yamlsafe"
)

// TestSkillFrontmatterMergeBombIsRefused: SKILL.md frontmatter with 40
// levels of merge keys fails to load with a coded error instead of hanging
// skills list, skills run, validate and run.
func TestSkillFrontmatterMergeBombIsRefused(t *testing.T) {
	bomb := "  " + strings.ReplaceAll(strings.TrimSuffix(yamlsafe.MergeBomb(40), "\n"), "\n", "\n  ")
	dir := filepath.Join(t.TempDir(), "bomb")
	writeTree(t, dir, map[string]string{"SKILL.md": "---\nname: bomb\ndescription: merges\nx:\n" + bomb + "\n---\nbody\n"})
	_, _, err := Load(dir, "")
	if e := agenterr.From(err); e == nil || e.Code != agenterr.CodeSkillParse || !strings.Contains(err.Error(), "nodes") {
		t.Fatalf("err = %v", err)
	}
}

// TestSkillFileSizeCap: a SKILL.md over MaxSkillFileBytes is refused with a
// coded error naming the file, without being read whole.
func TestSkillFileSizeCap(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "huge")
	writeTree(t, dir, map[string]string{"SKILL.md": "---\nname: huge\ndescription: big\n---\n"})
	f, err := os.OpenFile(filepath.Join(dir, "SKILL.md"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(MaxSkillFileBytes + 10); err != nil {
		t.Fatal(err)
	}
	f.Close()
	_, _, err = Load(dir, "")
	e := agenterr.From(err)
	if e == nil || e.Code != agenterr.CodeSkillParse || e.File != "huge/SKILL.md" || !strings.Contains(e.Hint, "MiB") {
		t.Fatalf("err = %v", err)
	}
}
