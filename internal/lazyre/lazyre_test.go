package lazyre

import (
	"strings"
	"testing"
)

func TestCompilesOnceOnFirstUse(t *testing.T) {
	word := New(`\w+`)
	re := word()
	if got := strings.Join(re.FindAllString("two words", -1), ","); got != "two,words" {
		t.Fatalf("got %q", got)
	}
	if word() != re {
		t.Error("a second call compiled the pattern again")
	}
}

func TestMustCompileAllReportsABadPattern(t *testing.T) {
	if expr, err := MustCompileAll(); err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	bad := New(`(unclosed`)
	expr, err := MustCompileAll()
	if expr != `(unclosed` || err == nil {
		t.Fatalf("MustCompileAll = %q, %v; want the bad pattern and its error", expr, err)
	}
	defer func() {
		if recover() == nil {
			t.Error("using a bad pattern did not panic")
		}
	}()
	bad()
}
