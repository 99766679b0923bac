package verify

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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
	p, err := CaptureToolchain(context.Background(), t.TempDir(), environ)
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
	p, err := CaptureToolchain(context.Background(), "", []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Remove()
	keys := map[string]bool{}
	for _, kv := range p.Env() {
		k, _, _ := strings.Cut(kv, "=")
		keys[k] = true
	}
	for _, k := range []string{"GOENV", "npm_config_userconfig", "PIP_CONFIG_FILE", "PYTHONNOUSERSITE"} {
		if !keys[k] {
			t.Fatalf("%s not pinned: %v", k, p.Env())
		}
	}
	off, err := CaptureToolchain(context.Background(), "", []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "GOENV=off"})
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

// TestPipConfigIsPinned: pip's user files (the XDG one and the older
// ~/.pip/pip.conf) are merged into one copy named by PIP_CONFIG_FILE, as
// pip reads them (the later file's key wins); pip itself reads the copy
// and not the user's files, which the model changes afterwards.
func TestPipConfigIsPinned(t *testing.T) {
	home := t.TempDir()
	write := func(name, body string) {
		t.Helper()
		path := filepath.Join(home, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(".pip/pip.conf", "[global]\ntimeout = 10\nindex-url = https://old.example/simple\n[install]\nno-compile = yes\n")
	write(".config/pip/pip.conf", "# mine\n[global]\nindex-url: https://new.example/simple\n  https://extra.example/simple\n")
	environ := []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
	p, err := CaptureToolchain(context.Background(), t.TempDir(), environ)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Remove()
	pinned := ""
	for _, kv := range p.Env() {
		if v, ok := strings.CutPrefix(kv, "PIP_CONFIG_FILE="); ok {
			pinned = v
		}
	}
	got, _ := os.ReadFile(pinned)
	want := "[global]\ntimeout = 10\nindex-url: https://new.example/simple\n  https://extra.example/simple\n[install]\nno-compile = yes\n"
	if string(got) != want {
		t.Fatalf("pinned pip.conf:\n%s\nwant:\n%s", got, want)
	}
	// The model points pip at its own index during the run.
	write(".config/pip/pip.conf", "[global]\nindex-url = https://evil.example/simple\n")
	if err := p.Restore(); err != nil {
		t.Fatal(err)
	}
	if exec.Command("python3", "-m", "pip", "--version").Run() != nil {
		t.Log("no pip: the copy is checked, not pip reading it")
		return
	}
	cmd := exec.Command("python3", "-m", "pip", "config", "list")
	cmd.Env = append(environ, p.Env()...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("pip config list: %v\n%s", err, out)
	}
	if strings.Contains(string(out), "evil") || !strings.Contains(string(out), "new.example") || !strings.Contains(string(out), "global.timeout='10'") {
		t.Fatalf("pip read other configuration than the pinned one:\n%s", out)
	}
	// Control: without the pin, pip reads what the model wrote.
	cmd = exec.Command("python3", "-m", "pip", "config", "list")
	cmd.Env = environ
	if out, _ := cmd.CombinedOutput(); !strings.Contains(string(out), "evil") {
		t.Fatalf("pip does not read the user's file, so the case proves nothing:\n%s", out)
	}
}

// TestEmptyUserSiteIsTurnedOff: with no user site-packages at the start,
// validators get PYTHONNOUSERSITE=1, and a .pth file the model puts there
// later (code that runs at every start of Python, as a pytest plugin
// installed with pip install --user would) does not run; a user site that
// held something at the start is left on.
func TestEmptyUserSiteIsTurnedOff(t *testing.T) {
	home := t.TempDir()
	environ := []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
	p, err := CaptureToolchain(context.Background(), t.TempDir(), environ)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Remove()
	if !slices.Contains(p.Env(), "PYTHONNOUSERSITE=1") {
		t.Fatalf("user site not turned off: %v", p.Env())
	}
	if py, err := exec.LookPath("python3"); err == nil {
		out, err := exec.Command(py, "-c", "import site; print(site.getusersitepackages())").Output()
		if err != nil {
			t.Fatal(err)
		}
		site := strings.Replace(strings.TrimSpace(string(out)), os.Getenv("HOME"), home, 1)
		if err := os.MkdirAll(site, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(site, "cheat.pth"), []byte("import sys; sys.stdout.write('CHEAT RAN\\n')\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		run := func(env []string) string {
			cmd := exec.Command(py, "-c", "pass")
			cmd.Env = env
			out, _ := cmd.CombinedOutput()
			return string(out)
		}
		if got := run(append(environ, p.Env()...)); strings.Contains(got, "CHEAT RAN") {
			t.Fatalf("the user site written after the start was read: %q", got)
		}
		if got := run(environ); !strings.Contains(got, "CHEAT RAN") {
			t.Fatalf("python does not read that user site, so the case proves nothing: %q", got)
		}
	}
	// A user site with something in it at the start stays on.
	site := filepath.Join(home, ".local", "lib", "python3.99", "site-packages")
	if err := os.MkdirAll(site, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(site, "mine.pth"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	q, err := CaptureToolchain(context.Background(), t.TempDir(), environ)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Remove()
	if slices.Contains(q.Env(), "PYTHONNOUSERSITE=1") {
		t.Fatalf("a user site in use was turned off: %v", q.Env())
	}
}
