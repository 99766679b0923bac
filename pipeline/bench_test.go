package pipeline

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkStageOverhead measures what the manager adds around a stage that
// does the least a contract allows (one small write), with contract
// validation off and on, for one stage and for a chain of 8, against
// calling the stage's Execute directly.
func BenchmarkStageOverhead(b *testing.B) {
	ctx := context.Background()
	write := func(_ context.Context, ac *AgentContext) error { return ac.Set(ac.AgentID()+".out", 1) }
	b.Run("direct", func(b *testing.B) {
		a := &FuncAgent{ID: "s0", Post: []string{"s0.out"}, Fn: func(_ context.Context, ac *AgentContext) error { return ac.Set("s0.out", 1) }}
		b.ReportAllocs()
		for b.Loop() {
			ac := NewAgentContext("", "")
			if _, err := a.Execute(ctx, ac); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, n := range []int{1, 8} {
		for _, validate := range []bool{false, true} {
			b.Run(fmt.Sprintf("stages=%d/validate=%v", n, validate), func(b *testing.B) {
				m := New(Config{Options: AgentExecutionOptions{ValidateContract: validate}})
				for i := 0; i < n; i++ {
					a := &FuncAgent{ID: fmt.Sprintf("s%d", i), Post: []string{fmt.Sprintf("s%d.out", i)}, Fn: write}
					if i > 0 {
						a.Pre = []string{fmt.Sprintf("s%d.out", i-1)}
					}
					if err := m.RegisterAgent(a); err != nil {
						b.Fatal(err)
					}
				}
				in := NewAgentContext("s", "t")
				b.ReportAllocs()
				for b.Loop() {
					if _, err := m.Execute(ctx, in); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
