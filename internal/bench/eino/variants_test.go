package eino

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cloudwego/eino/adk"
	"github.com/cloudwego/eino/callbacks"
	einomodel "github.com/cloudwego/eino/components/model"
	einotool "github.com/cloudwego/eino/components/tool"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/flow/agent"
	"github.com/cloudwego/eino/flow/agent/react"
	"github.com/cloudwego/eino/schema"
)

// The ways a user writes an eino agent for a run of iterations, measured
// next to BenchmarkIteration's eino (the react agent built once for the
// whole benchmark and reused by every run):
//
//   - react/per-run: the react agent built for each run (a task), then
//     one Generate per iteration on the growing conversation.
//   - react/per-iteration: the react agent built for every iteration.
//   - react/callbacks: the react agent of one run with a callbacks
//     handler that journals every component's end (the model's message
//     and usage, the graph's and nodes' ends) with json.Encoder, one
//     write per callback: eino's own way of recording what a run did.
//   - adk: the ChatModelAgent and Runner that eino's README starts with,
//     built per run; Runner.Run on the growing conversation per
//     iteration, its events drained.
//   - adk/stream: the same with EnableStreaming (the model streams; the
//     caller concatenates the message stream of each event).
//   - adk/per-iteration, adk/stream/per-iteration: the ChatModelAgent
//     and Runner built for every iteration (each iteration a task), the
//     model called plain or streaming.
//   - adk/journal: adk with every AgentEvent written to a file with
//     json.Encoder, one write each (the caller's journal of the events
//     eino reports).
func BenchmarkIterationEinoVariants(b *testing.B) {
	ctx := context.Background()
	b.Run("react/per-run", func(b *testing.B) {
		perIteration(b, func(b *testing.B, start, stop func()) {
			start()
			a := newEinoAgent(b, false)
			einoConversation(ctx, b, func(h []*schema.Message) *schema.Message { return reactGenerate(ctx, b, a, h) })
			stop()
		})
	})
	b.Run("react/per-iteration", func(b *testing.B) {
		perIteration(b, func(b *testing.B, start, stop func()) {
			start()
			einoConversation(ctx, b, func(h []*schema.Message) *schema.Message {
				return reactGenerate(ctx, b, newEinoAgent(b, false), h)
			})
			stop()
		})
	})
	b.Run("react/callbacks", func(b *testing.B) {
		perIteration(b, func(b *testing.B, start, stop func()) {
			f := openJournal(b)
			defer f.Close()
			start()
			a := newEinoAgent(b, false)
			h := callbackJournal(b, f)
			einoConversation(ctx, b, func(hist []*schema.Message) *schema.Message {
				return reactGenerate(ctx, b, a, hist, agent.WithComposeOptions(compose.WithCallbacks(h)))
			})
			stop()
		})
	})
	for _, v := range []struct {
		name            string
		stream, journal bool
	}{{"adk", false, false}, {"adk/stream", true, false}, {"adk/journal", false, true}} {
		b.Run(v.name, func(b *testing.B) {
			perIteration(b, func(b *testing.B, start, stop func()) {
				var enc *json.Encoder
				if v.journal {
					f := openJournal(b)
					defer f.Close()
					enc = json.NewEncoder(f)
					enc.SetEscapeHTML(false)
				}
				start()
				r := newADKRunner(b, false, v.stream)
				einoConversation(ctx, b, func(h []*schema.Message) *schema.Message { return adkRun(ctx, b, r, h, enc) })
				stop()
			})
		})
	}
	for _, stream := range []bool{false, true} {
		name := "adk/per-iteration"
		if stream {
			name = "adk/stream/per-iteration"
		}
		b.Run(name, func(b *testing.B) {
			perIteration(b, func(b *testing.B, start, stop func()) {
				start()
				einoConversation(ctx, b, func(h []*schema.Message) *schema.Message {
					return adkRun(ctx, b, newADKRunner(b, false, stream), h, nil)
				})
				stop()
			})
		})
	}
}

// BenchmarkToolTurnEinoVariants is BenchmarkToolTurn's query (model
// turn asking for the tool, the tool, model turn with the text) through
// eino's adk ChatModelAgent and Runner (built once, like
// BenchmarkToolTurn's react agent), plain and streaming.
func BenchmarkToolTurnEinoVariants(b *testing.B) {
	ctx := context.Background()
	for _, stream := range []bool{false, true} {
		name := "adk"
		if stream {
			name = "adk/stream"
		}
		b.Run(name, func(b *testing.B) {
			r := newADKRunner(b, true, stream)
			perOp(b, func() {
				out := adkRun(ctx, b, r, []*schema.Message{schema.UserMessage(stepPrompt(1))}, nil)
				if out.Content != replyText {
					b.Fatalf("%+v", out)
				}
			})
		})
	}
}

// einoConversation runs iterationsPerRun iterations on a growing
// conversation, each answered by turn.
func einoConversation(_ context.Context, b *testing.B, turn func([]*schema.Message) *schema.Message) {
	history := []*schema.Message{schema.SystemMessage(systemPrompt)}
	for i := 1; i <= iterationsPerRun; i++ {
		history = append(history, schema.UserMessage(stepPrompt(i)))
		history = append(history, turn(history))
	}
	if len(history) != 2*iterationsPerRun+1 {
		b.Fatal(len(history))
	}
}

func reactGenerate(ctx context.Context, b *testing.B, a *react.Agent, h []*schema.Message, opts ...agent.AgentOption) *schema.Message {
	out, err := a.Generate(ctx, h, opts...)
	if err != nil {
		b.Fatal(err)
	}
	return out
}

func openJournal(b *testing.B) *os.File {
	f, err := os.OpenFile(filepath.Join(b.TempDir(), "events.jsonl"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	return f
}

// callbackJournal is an eino callbacks handler writing one line per
// component end: the model's message and usage, or the component's kind.
func callbackJournal(b *testing.B, f *os.File) callbacks.Handler {
	enc := json.NewEncoder(f)
	enc.SetEscapeHTML(false)
	var seq int64
	return callbacks.NewHandlerBuilder().OnEndFn(func(ctx context.Context, info *callbacks.RunInfo, out callbacks.CallbackOutput) context.Context {
		seq++
		line := envelope{Seq: seq, Time: time.Now().UTC(), Type: info.Type + "." + string(info.Component) + ".end", Step: info.Name}
		if info.Component == "ChatModel" {
			if o := einomodel.ConvCallbackOutput(out); o != nil {
				line.Data = o
			}
		}
		if err := enc.Encode(line); err != nil {
			b.Fatal(err)
		}
		return ctx
	}).Build()
}

func newADKRunner(b *testing.B, toolCall, stream bool) *adk.Runner {
	ctx := context.Background()
	a, err := adk.NewChatModelAgent(ctx, &adk.ChatModelAgentConfig{
		Name: "bench", Description: "benchmark agent",
		Model: einoModel{toolCall: toolCall},
		ToolsConfig: adk.ToolsConfig{ToolsNodeConfig: compose.ToolsNodeConfig{
			Tools: []einotool.BaseTool{einoShout(b)}}},
		MaxIterations: 12,
	})
	if err != nil {
		b.Fatal(err)
	}
	return adk.NewRunner(ctx, adk.RunnerConfig{Agent: a, EnableStreaming: stream})
}

// adkRun runs the runner on msgs, drains its events (writing each with
// enc when enc is set) and returns the last assistant message.
func adkRun(ctx context.Context, b *testing.B, r *adk.Runner, msgs []*schema.Message, enc *json.Encoder) *schema.Message {
	it := r.Run(ctx, msgs)
	var last *schema.Message
	for {
		ev, ok := it.Next()
		if !ok {
			break
		}
		if ev.Err != nil {
			b.Fatal(ev.Err)
		}
		if ev.Output == nil || ev.Output.MessageOutput == nil {
			continue
		}
		mv := ev.Output.MessageOutput
		msg := mv.Message
		if mv.IsStreaming {
			var chunks []*schema.Message
			for {
				c, err := mv.MessageStream.Recv()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					b.Fatal(err)
				}
				chunks = append(chunks, c)
			}
			var err error
			if msg, err = schema.ConcatMessages(chunks); err != nil {
				b.Fatal(err)
			}
		}
		if enc != nil {
			if err := enc.Encode(envelope{Time: time.Now().UTC(), Type: "agent.event", Step: ev.AgentName, Data: msg}); err != nil {
				b.Fatal(err)
			}
		}
		if mv.Role == schema.Assistant {
			last = msg
		}
	}
	if last == nil {
		b.Fatal("no assistant message")
	}
	return last
}
