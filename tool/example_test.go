package tool_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/capstan-dev/capstan/llm"
	"github.com/capstan-dev/capstan/llm/script"
	"github.com/capstan-dev/capstan/tool"
)

// A custom Go tool with a typed input: the JSON Schema the model sees is
// inferred from WeatherInput, and the model's input is checked against it
// before the function runs. Here the offline script provider plays the
// model: its first turn calls the tool twice, once with a bad input.
func ExampleFunc() {
	type WeatherInput struct {
		City string `json:"city" jsonschema:"the city to look up"`
		Days int    `json:"days,omitempty" jsonschema:"forecast days (default 1)"`
	}
	weather := tool.Func("Weather", "Look up the weather forecast for a city.",
		func(ctx context.Context, in WeatherInput) (string, error) {
			return fmt.Sprintf("%s: sunny for %d day(s)", in.City, max(in.Days, 1)), nil
		}).WithKind(tool.KindRead)
	fmt.Println(string(weather.Spec().InputSchema))

	model, err := script.Parse("example.yaml", []byte(`turns:
  - tool_calls:
      - {name: Weather, input: {city: Oslo, days: 2}}
      - {name: Weather, input: {town: Oslo}}
  - text: done
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	loop := llm.NewToolLoop(script.New(model), llm.Config{Tools: []tool.Tool{weather}})
	res, err := loop.Query(context.Background(), "What is the weather in Oslo?", llm.QueryOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, use := range res.ToolUses {
		text, _, _ := strings.Cut(use.Output, "; hint:")
		fmt.Printf("error=%v %s\n", use.IsError, text)
	}
	// Output:
	// {"type":"object","properties":{"city":{"type":"string","description":"the city to look up"},"days":{"type":"integer","description":"forecast days (default 1)"}},"required":["city"],"additionalProperties":false}
	// error=false Oslo: sunny for 2 day(s)
	// error=true TOOL_INPUT: Weather: input does not match the tool's input schema: at (root): missing required property "city"; at (root): property "town" is not allowed
}
