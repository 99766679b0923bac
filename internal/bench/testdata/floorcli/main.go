// Command floorcli is the footprint floor capstan is measured against: a
// cobra CLI that makes one streamed tool call with anthropic-sdk-go and one
// with openai-go/v3, and nothing else. The footprint benchmarks build it
// next to capstan; it is not part of capstan.
//
// The floortemporal variant builds this file together with its own
// temporal.go, which adds a command through extraCommands.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
	"github.com/spf13/cobra"
)

// extraCommands are added by the variants built from this file (nil here).
var extraCommands []*cobra.Command

func main() {
	var baseURL, model string
	root := &cobra.Command{Use: "floorcli", Short: "One streamed tool call with each official client"}
	root.PersistentFlags().StringVar(&baseURL, "base-url", "", "API base URL")
	root.PersistentFlags().StringVar(&model, "model", "m", "model")
	root.AddCommand(&cobra.Command{Use: "anthropic", Short: "Stream one Anthropic tool call", RunE: func(cmd *cobra.Command, _ []string) error {
		c := anthropic.NewClient(aoption.WithBaseURL(baseURL), aoption.WithAPIKey("k"), aoption.WithMaxRetries(0))
		tool := anthropic.ToolParam{Name: "get_weather", InputSchema: anthropic.ToolInputSchemaParam{
			Properties: map[string]any{"city": map[string]any{"type": "string"}}}}
		stream := c.Messages.NewStreaming(cmd.Context(), anthropic.MessageNewParams{
			Model: anthropic.Model(model), MaxTokens: 64,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Weather in Paris?"))},
			Tools:    []anthropic.ToolUnionParam{{OfTool: &tool}},
		})
		var msg anthropic.Message
		for stream.Next() {
			if err := msg.Accumulate(stream.Current()); err != nil {
				return err
			}
		}
		if err := stream.Err(); err != nil {
			return err
		}
		for _, b := range msg.Content {
			if b.Type == "tool_use" {
				fmt.Printf("%s %s\n", b.Name, b.Input)
			}
		}
		return nil
	}})
	root.AddCommand(&cobra.Command{Use: "openai", Short: "Stream one OpenAI tool call", RunE: func(cmd *cobra.Command, _ []string) error {
		c := openai.NewClient(ooption.WithBaseURL(baseURL), ooption.WithAPIKey("k"), ooption.WithMaxRetries(0))
		stream := c.Chat.Completions.NewStreaming(cmd.Context(), openai.ChatCompletionNewParams{
			Model:    shared.ChatModel(model),
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather in Paris?")},
			Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
				Name: "get_weather", Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}})},
		})
		var acc openai.ChatCompletionAccumulator
		for stream.Next() {
			acc.AddChunk(stream.Current())
		}
		if err := stream.Err(); err != nil {
			return err
		}
		for _, ch := range acc.Choices {
			for _, tc := range ch.Message.ToolCalls {
				fmt.Printf("%s %s\n", tc.Function.Name, tc.Function.Arguments)
			}
		}
		return nil
	}})
	root.AddCommand(extraCommands...)
	if err := root.ExecuteContext(context.Background()); err != nil {
		os.Exit(1)
	}
}
