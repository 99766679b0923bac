package toolconf

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCaptureRestoresTheCopies: the go env file and ~/.npmrc are copied
// when captured; later writes to the originals do not reach the copies,
// and a write to a copy is undone by Restore.
func TestCaptureRestoresTheCopies(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go")
	}
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".config", "go"), 0o755); err != nil {
		t.Fatal(err)
	}
	goenv := filepath.Join(home, ".config", "go", "env")
	if err := os.WriteFile(goenv, []byte("GOFLAGS=-count=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".npmrc"), []byte("fund=false\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	environ := []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
	p, err := Capture(context.Background(), t.TempDir(), environ)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Remove()
	vars := map[string]string{}
	for _, kv := range p.Env() {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	if p.Sources["GOENV"] != goenv || vars["GOENV"] == "" || vars["npm_config_userconfig"] == "" {
		t.Fatalf("env %v sources %v", vars, p.Sources)
	}
	// The model writes the original and the copy.
	_ = os.WriteFile(goenv, []byte("GOFLAGS=-exec=/tmp/w.sh\n"), 0o644)
	_ = os.WriteFile(vars["GOENV"], []byte("GOFLAGS=-exec=/tmp/w.sh\n"), 0o644)
	if err := p.Restore(); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "env", "GOFLAGS")
	cmd.Env = append(environ, "GOENV="+vars["GOENV"])
	if out, err := cmd.CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "-count=1" {
		t.Fatalf("go env GOFLAGS with the pinned file: %q %v", out, err)
	}
	if b, _ := os.ReadFile(vars["npm_config_userconfig"]); string(b) != "fund=false\n" {
		t.Fatalf("npmrc copy %q", b)
	}
	if err := p.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p.Dir); !os.IsNotExist(err) {
		t.Fatalf("copies left: %v", err)
	}
}

// TestCaptureWithoutConfig: a missing go env file is pinned as an empty
// one (a file created later is not read); GOENV=off stays off.
func TestCaptureWithoutConfig(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go")
	}
	home := t.TempDir()
	p, err := Capture(context.Background(), "", []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Remove()
	if len(p.Env()) != 2 {
		t.Fatalf("env %v", p.Env())
	}
	off, err := Capture(context.Background(), "", []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "GOENV=off"})
	if err != nil {
		t.Fatal(err)
	}
	defer off.Remove()
	for _, kv := range off.Env() {
		if strings.HasPrefix(kv, "GOENV=") {
			t.Fatalf("GOENV=off was pinned: %v", off.Env())
		}
	}
}
