package verdict_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/verdict"
)

func ExampleMachine_Transition() {
	var reg agentdir.Registry
	json.Unmarshal([]byte(`{"agentId":"demo","entryStep":"write","steps":{
		"write":{"stepId":"write","c2":"initial","c3":"write","check":{"type":"keyword","keywords":["DRAFTED"],
			"onPass":{"next":"review"},"onFail":{"retry":true}}},
		"review":{"stepId":"review","c2":"initial","c3":"review","check":{"type":"keyword","keywords":["LGTM"],
			"onPass":{"complete":true},"onFail":{"next":"write"}}}}}`), &reg)
	m, _ := verdict.NewMachine(new(reg), verdict.MachineOptions{})
	for _, passed := range []bool{false, true, false, true, true} {
		mv, _ := m.Transition(context.Background(), verdict.StepOutcome{Passed: passed})
		fmt.Printf("%s -> %s (%s)\n", mv.From, mv.To, mv.Kind)
	}
	fmt.Println(m.Completed(), m.Visits())
	// Output:
	// write -> write (retry)
	// write -> review (next)
	// review -> write (next)
	// write -> review (next)
	// review -> review (complete)
	// true map[review:2 write:2]
}
