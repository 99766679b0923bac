package skill

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
)

// With CatalogConfig.FS (the pinned agent definition) the catalog takes
// each skill's SKILL.md from it, not from the folder on disk.
func TestCatalogReadsSkillMDFromPinnedDefinition(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "skills", "notes")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "SKILL.md"), []byte("---\nname: notes\ndescription: FORGED description\n---\nFORGED body\n"), 0o644)
	fsys := fstest.MapFS{"skills/notes/SKILL.md": {Data: []byte("---\nname: notes\ndescription: Real description\n---\nReal body\n")}}
	c, warns := NewCatalog([]string{"skills"}, CatalogConfig{BaseDir: base, FS: fsys})
	if len(warns) != 0 || len(c.Skills()) != 1 {
		t.Fatalf("skills %v, warnings %v", c.Skills(), warns)
	}
	if sk := c.Skills()[0]; sk.Description != "Real description" || !strings.Contains(sk.Body, "Real body") || sk.Root != dir {
		t.Fatalf("skill %+v", sk)
	}
	if s := c.SystemPromptSection(); strings.Contains(s, "FORGED") {
		t.Fatalf("system prompt section uses the disk: %s", s)
	}
	// A skill whose SKILL.md is not in the pinned definition is no skill.
	empty, _ := NewCatalog([]string{"skills"}, CatalogConfig{BaseDir: base, FS: fstest.MapFS{}})
	if len(empty.Skills()) != 0 {
		t.Fatalf("skills %v", empty.Skills())
	}
}
