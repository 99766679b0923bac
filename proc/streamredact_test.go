package proc

import (
	"fmt"
	"strings"
	"testing"
)

func TestStreamRedactorSecretSplitAcrossFragments(t *testing.T) {
	r := NewStreamRedactor([]string{"OPENAI_API_KEY=sk-abcdefghijklmnop", "HOME=/home/someone-long-enough"})
	var out strings.Builder
	for _, d := range []string{"key: sk-abc", "defgh", "ijklmnop and sk-ab", "c is not it", "\n", "home is /home/someone-long-enough"} {
		out.WriteString(r.Push(d))
	}
	out.WriteString(r.Flush())
	if want := "key: [REDACTED] and sk-abc is not it\nhome is /home/someone-long-enough"; out.String() != want {
		t.Fatalf("streamed %q, want %q", out.String(), want)
	}
	r.Push("then sk-abcdefg")
	r.Drop()
	if got := r.Push("hijklmnop"); got != "hijklmnop" {
		t.Fatalf("after Drop: %q", got)
	}
	var none *StreamRedactor
	if none.Push("sk-abcdefghijklmnop") != "sk-abcdefghijklmnop" || none.Flush() != "" || none.Text("x") != "x" {
		t.Fatal("a nil StreamRedactor changed text")
	}
}

// FuzzStreamRedactor: however text is split into fragments, nothing the
// redactor lets through contains a secret, and with one secret the
// streamed output equals redacting the whole text at once.
func FuzzStreamRedactor(f *testing.F) {
	f.Add("key: sk-abcdefghijklmnop and more", "sk-abcdefghijklmnop", "", []byte{3, 9, 2})
	f.Add("aaaaaaaaaaaaaaaa", "aaaaaaaa", "aaaaaaab", []byte{1, 1, 1, 1, 1, 1, 1})
	f.Add("xx-secret-secret-secret-xx", "secret-secret", "t-secret-s", []byte{5, 5})
	f.Fuzz(func(t *testing.T, text, secret1, secret2 string, cuts []byte) {
		var env []string
		for i, s := range []string{secret1, secret2} {
			if len(s) >= 8 && !strings.ContainsAny(s, "\x00") {
				env = append(env, fmt.Sprintf("FUZZ%d_API_KEY=%s", i, s))
			}
		}
		r := NewStreamRedactor(env)
		var out strings.Builder
		rest := text
		for _, c := range cuts {
			n := min(int(c), len(rest))
			out.WriteString(r.Push(rest[:n]))
			rest = rest[n:]
		}
		out.WriteString(r.Push(rest))
		out.WriteString(r.Flush())
		for _, s := range r.secrets {
			if strings.Contains(out.String(), s) {
				t.Fatalf("secret %q let through: %q", s, out.String())
			}
		}
		if len(r.secrets) == 1 && out.String() != r.Text(text) {
			t.Fatalf("streamed %q, whole text redacts to %q", out.String(), r.Text(text))
		}
	})
}
