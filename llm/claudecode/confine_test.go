package claudecode

import (
	"os"
	"path/filepath"
	"testing"
)

// TestPrivateHomeCopiesOnlyTheLogin: a sandboxed CLI's configuration
// folder is new and private; a `claude login` (no key in the environment)
// has its credentials file copied in, mode 0600, and nothing else of the
// user's folder; with a key set, nothing is copied.
func TestPrivateHomeCopiesOnlyTheLogin(t *testing.T) {
	home := t.TempDir()
	user := filepath.Join(home, ".claude")
	if err := os.MkdirAll(filepath.Join(user, "projects"), 0o700); err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{credentialsFile: `{"login":"x"}`, "settings.json": `{"hooks":{}}`} {
		if err := os.WriteFile(filepath.Join(user, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	env := map[string]string{"HOME": home}
	getenv := func(k string) string { return env[k] }
	dir, err := privateHome(getenv)
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != credentialsFile {
		t.Fatalf("private folder holds %v, want the credentials file only", entries)
	}
	if fi, err := os.Stat(filepath.Join(dir, credentialsFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("credentials: %v, %v", fi, err)
	}
	env["ANTHROPIC_API_KEY"] = "sk-test"
	dir2, err := privateHome(getenv)
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir2)
	if entries, _ := os.ReadDir(dir2); len(entries) != 0 {
		t.Fatalf("with a key set the private folder holds %v", entries)
	}
}

// TestEndpoint is the host:port the sandbox lets the CLI reach.
func TestEndpoint(t *testing.T) {
	none := func(string) string { return "" }
	for _, c := range []struct{ base, env, want string }{
		{"", "", "api.anthropic.com:443"},
		{"", "http://127.0.0.1:8080/v1", "127.0.0.1:8080"},
		{"https://gw.example.com", "http://127.0.0.1:1", "gw.example.com:443"},
		{"http://[::1]/x", "", "[::1]:80"},
	} {
		getenv := none
		if c.env != "" {
			getenv = func(k string) string {
				if k == "ANTHROPIC_BASE_URL" {
					return c.env
				}
				return ""
			}
		}
		if got, err := Endpoint(c.base, getenv); err != nil || got != c.want {
			t.Errorf("Endpoint(%q, %q) = %q, %v; want %q", c.base, c.env, got, err, c.want)
		}
	}
	if _, err := Endpoint("ftp://x", none); err == nil {
		t.Error("an ftp endpoint was accepted")
	}
}
