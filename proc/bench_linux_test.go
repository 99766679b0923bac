//go:build linux

package proc

import (
	"os"
	"os/exec"
	"testing"
)

// BenchmarkDirectTrue starts /bin/true as the Bash tool did before the
// supervisor: one fork and exec.
func BenchmarkDirectTrue(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		cmd := exec.Command("/bin/true")
		cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
		if err := cmd.Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSupervisedTrue starts /bin/true under the supervisor, as the
// Bash tool does now: the binary re-executed as a child subreaper, which
// starts the program and reaps its tree.
func BenchmarkSupervisedTrue(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		sup, err := Supervise(SupervisedSpec{Argv: []string{"/bin/true"}, Env: []string{"PATH=" + os.Getenv("PATH")}})
		if err != nil {
			b.Fatal(err)
		}
		if err := sup.Start(); err != nil {
			b.Fatal(err)
		}
		_ = sup.Cmd.Wait()
		if st := sup.Status(); !st.Started || st.ExitCode != 0 {
			b.Fatalf("status %+v", st)
		}
	}
}
