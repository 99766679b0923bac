// Package mcp connects to the Model Context Protocol servers an agent
// declares (runner.mcpServers) and offers their tools to the model as
// capstan tools named mcp__<server>__<tool>, governed by the same
// tool.Policy as the built-in tools (Kind execute: a remote tool's
// read-only claim is not trusted).
//
// Stdio servers (command/args/env) are started as child processes;
// streamable HTTP servers (url/headers) are reached over HTTP. Built on
// github.com/modelcontextprotocol/go-sdk.
package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/internal/lazyre"
	"github.com/capstan-dev/capstan/proc"

	"github.com/capstan-dev/capstan/sandbox"
	"github.com/capstan-dev/capstan/tool"
	"github.com/capstan-dev/capstan/tool/builtin"
	"github.com/capstan-dev/capstan/tool/tooldecl"
)

// Prefix starts every MCP tool name.
const Prefix = "mcp__"

// Options tune Connect.
type Options struct {
	// HTTPClient reaches streamable HTTP servers (nil = http.DefaultClient).
	HTTPClient *http.Client
	// Transports, when set for a server name, replace the transport built
	// from its config (in-memory servers, tests, embedding).
	Transports map[string]sdk.Transport
	// WorkDir is the working directory of stdio servers ("" = current).
	WorkDir string
	// ConnectTimeout bounds connecting and listing tools per server
	// (0 = 30s).
	ConnectTimeout time.Duration
	// Events receives a warning event when a server stops during the run
	// and is restarted, or cannot be (nil = none).
	Events event.Emitter
	// Env is the allow-list of variables stdio servers get besides the
	// minimal base (runner.boundaries.env; see proc.ForCommands); a
	// server's own env entries are added on top.
	Env []string
	// Sandbox, when set, is the sandbox stdio servers run in (the agent's
	// Bash sandbox: the work dir writable, the system directories, the
	// server's program and its absolute path arguments readable, the
	// network of runner.boundaries.sandbox.network). nil runs them with
	// the caller's rights (the run opted out of the sandbox).
	Sandbox *sandbox.CommandRunner
}

// Set is a group of connected MCP servers and their tools.
type Set struct {
	mu       sync.Mutex
	sessions map[string]*sdk.ClientSession
	servers  map[string]*server
	tools    []tool.Tool
	client   *sdk.Client
	opts     Options
	timeout  time.Duration
	closed   bool
	notes    []string
}

// server is one connected server: its session is replaced when a server
// that stopped during the run is restarted (once).
type server struct {
	name      string
	cfg       tooldecl.MCPServer
	cs        *sdk.ClientSession // nil once it stopped and could not be restarted
	restarted bool
}

// Connect connects to every server and lists its tools. On any failure
// the servers already started are shut down and the error names the
// server (File agent.json, Pointer /runner/mcpServers/<name>).
func Connect(ctx context.Context, servers map[string]tooldecl.MCPServer) (*Set, error) {
	return ConnectWith(ctx, servers, Options{})
}

// ConnectWith is Connect with options.
func ConnectWith(ctx context.Context, servers map[string]tooldecl.MCPServer, opts Options) (*Set, error) {
	s := &Set{sessions: map[string]*sdk.ClientSession{}, servers: map[string]*server{}, opts: opts}
	names := make([]string, 0, len(servers)+len(opts.Transports))
	seen := map[string]bool{}
	for n := range servers {
		names, seen[n] = append(names, n), true
	}
	for n := range opts.Transports {
		if !seen[n] {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	timeout := opts.ConnectTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	s.timeout = timeout
	s.client = sdk.NewClient(&sdk.Implementation{Name: "capstan", Version: "1"}, nil)
	for _, name := range names {
		if err := s.connect(ctx, s.client, name, servers[name], opts, timeout); err != nil {
			_ = s.Close()
			return nil, err
		}
	}
	return s, nil
}

var validName = lazyre.New(`^[A-Za-z0-9_-]+$`)

func serverError(name, format string, args ...any) *agenterr.Error {
	e := agenterr.New(agenterr.CodeDependencyResolution, agenterr.LayerTool, false, "MCP server %q: "+format, append([]any{name}, args...)...)
	e.File = agentdir.AgentFile
	e.Pointer = "/runner/mcpServers/" + name
	return e
}

func (s *Set) connect(ctx context.Context, client *sdk.Client, name string, cfg tooldecl.MCPServer, opts Options, timeout time.Duration) error {
	if !validName().MatchString(name) || strings.Contains(name, "__") {
		e := serverError(name, "invalid server name")
		e.Hint = "use letters, digits, '-' and single '_' (tools are named mcp__<server>__<tool>)"
		return e
	}
	t, err := transport(name, cfg, opts)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cs, err := client.Connect(cctx, t, nil)
	if err != nil {
		e := serverError(name, "cannot connect")
		e.Err = err
		e.Hint = "check the server's command or url; run it by hand to see its error"
		return e
	}
	srv := &server{name: name, cfg: cfg, cs: cs}
	s.mu.Lock()
	s.sessions[name] = cs
	s.servers[name] = srv
	s.mu.Unlock()
	taken := map[string]bool{}
	for rt, err := range cs.Tools(cctx, nil) {
		if err != nil {
			e := serverError(name, "cannot list tools")
			e.Err = err
			return e
		}
		r := newRemote(name, rt, s, srv)
		// Two remote names may sanitise to the same capstan name
		// ("a.b" and "a_b"); later ones get a numeric suffix so
		// neither shadows the other.
		base := r.spec.Name
		for i := 2; taken[r.spec.Name]; i++ {
			suffix := fmt.Sprintf("_%d", i)
			if len(base)+len(suffix) > 64 {
				base = base[:64-len(suffix)]
			}
			r.spec.Name = base + suffix
		}
		taken[r.spec.Name] = true
		s.tools = append(s.tools, r)
	}
	return nil
}

func transport(name string, cfg tooldecl.MCPServer, opts Options) (sdk.Transport, error) {
	if t, ok := opts.Transports[name]; ok {
		return t, nil
	}
	switch {
	case cfg.Command != "" && cfg.URL != "":
		e := serverError(name, "has both command and url")
		e.Hint = "keep command (stdio) or url (streamable HTTP), not both"
		return nil, e
	case cfg.Command != "":
		// A program named without a directory (npx, uvx, python) is
		// looked up outside the work dir: a PATH entry inside it, where
		// the model writes, may not supply the server capstan starts.
		prog := cfg.Command
		if !strings.Contains(prog, "/") {
			wd := opts.WorkDir
			if wd == "" {
				wd, _ = os.Getwd()
			}
			p, err := proc.LookPath(prog, os.Getenv("PATH"), wd)
			if err != nil && !proc.IsProgramNotFound(err) {
				e := serverError(name, "cannot be started: "+err.Error())
				e.Hint = "remove the work dir's directories from PATH, or name the server's program by its absolute path"
				return nil, e
			}
			if err == nil {
				prog = p
			}
		}
		env := proc.ForCommands(os.Environ(), opts.Env)
		for k, v := range cfg.Env {
			env = append(env, k+"="+v)
		}
		if opts.Sandbox != nil {
			return sandboxedTransport(name, prog, cfg.Args, env, opts)
		}
		cmd := exec.Command(prog, cfg.Args...)
		cmd.Dir = opts.WorkDir
		cmd.Env = env
		return &sdk.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}, nil
	case cfg.URL != "":
		hc := opts.HTTPClient
		if hc == nil {
			hc = http.DefaultClient
		}
		if len(cfg.Headers) > 0 {
			base := hc.Transport
			if base == nil {
				base = http.DefaultTransport
			}
			c := *hc
			c.Transport = headerTransport{base: base, headers: cfg.Headers}
			hc = &c
		}
		return &sdk.StreamableClientTransport{Endpoint: cfg.URL, HTTPClient: hc, MaxRetries: 1}, nil
	}
	e := serverError(name, "has neither command nor url")
	e.Hint = "give it a command (stdio) or a url (streamable HTTP)"
	return nil, e
}

// sandboxedTransport starts a stdio server in opts.Sandbox: a program
// named by a relative path is the work dir's; the program and the
// absolute paths among its arguments that exist are readable.
func sandboxedTransport(name, prog string, args, env []string, opts Options) (sdk.Transport, error) {
	wd := opts.WorkDir
	if wd == "" {
		wd, _ = os.Getwd()
	}
	wd, err := filepath.Abs(wd)
	if err != nil {
		return nil, serverError(name, "work dir: %v", err)
	}
	if !filepath.IsAbs(prog) {
		prog = filepath.Join(wd, prog)
	}
	var readable []string
	for _, a := range args {
		if filepath.IsAbs(a) {
			if _, err := os.Stat(a); err == nil {
				readable = append(readable, filepath.Clean(a))
			}
		}
	}
	roots := installRoots(prog, args, wd)
	if len(roots) > 0 && opts.Events != nil {
		opts.Events.Emit(event.Warning(fmt.Sprintf(
			"MCP server %q: the sandbox lets it read its install as well, read-only: %s", name, strings.Join(roots, ", "))))
	}
	readable = append(readable, roots...)
	return &boxedTransport{name: name, box: opts.Sandbox, argv: append([]string{prog}, args...), dir: wd, env: env, readable: readable}, nil
}

// InstallRoots is what a sandboxed stdio server cfg reads of its install
// besides the system directories and the work dir workDir (the rule of
// sandbox.InstallRoots, for its resolved program and for the absolute
// paths among its arguments), read-only. nil for a server named by url.
func InstallRoots(cfg tooldecl.MCPServer, workDir string) []string {
	if cfg.Command == "" {
		return nil
	}
	wd, err := filepath.Abs(workDir)
	if err != nil {
		return nil
	}
	prog := cfg.Command
	switch {
	case !strings.Contains(prog, "/"):
		p, err := proc.LookPath(prog, os.Getenv("PATH"), wd)
		if err != nil {
			return nil
		}
		prog = p
	case !filepath.IsAbs(prog):
		prog = filepath.Join(wd, prog)
	}
	return installRoots(prog, cfg.Args, wd)
}

// installRoots is InstallRoots of a resolved program.
func installRoots(prog string, args []string, wd string) []string {
	roots := sandbox.InstallRoots(prog, os.Getenv("PATH"), wd)
	for _, a := range args {
		if filepath.IsAbs(a) {
			roots = append(roots, sandbox.InstallRoots(a, os.Getenv("PATH"), wd)...)
		}
	}
	slices.Sort(roots)
	return slices.Compact(roots)
}

// boxedTransport is an MCP stdio transport whose server runs in the
// sandbox.
type boxedTransport struct {
	name      string
	box       *sandbox.CommandRunner
	argv, env []string
	dir       string
	readable  []string
}

// Connect starts the server and speaks to it on its standard streams. The
// server outlives ctx (the connect timeout); closing the connection ends
// it.
func (t *boxedTransport) Connect(ctx context.Context) (sdk.Connection, error) {
	srv, err := t.box.StartServer(context.WithoutCancel(ctx), t.argv, t.dir, t.env, t.readable)
	if err != nil {
		return nil, err
	}
	conn, err := (&sdk.IOTransport{Reader: boxedOutput{srv}, Writer: srv.Stdin}).Connect(ctx)
	if err != nil {
		srv.Close()
		return nil, err
	}
	return conn, nil
}

// boxedOutput is a sandboxed server's output; closing it ends the server.
// An output that ends before the server answered carries the sandbox's
// account of why (setup error, limit, exit code and standard error).
type boxedOutput struct{ srv *sandbox.Server }

func (o boxedOutput) Read(p []byte) (int, error) {
	n, err := o.srv.Stdout.Read(p)
	if err == io.EOF {
		if res, rerr := o.srv.Wait(); rerr != nil {
			return n, fmt.Errorf("the sandbox could not start the server: %v: %w", rerr, io.EOF)
		} else if res.Status != sandbox.StatusOK {
			msg := res.Reason
			if stderr := strings.TrimSpace(o.srv.Stderr()); stderr != "" {
				msg += ": " + firstLines(stderr, 5)
			}
			return n, fmt.Errorf("the server ended in the sandbox (%s): %w", msg, io.EOF)
		}
	}
	return n, err
}

func (o boxedOutput) Close() error {
	err := o.srv.Stdout.Close()
	o.srv.Close()
	return err
}

// firstLines is the first n lines of s.
func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = append(lines[:n], "…")
	}
	return strings.Join(lines, " | ")
}

type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
}

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.headers {
		r.Header.Set(k, v)
	}
	return h.base.RoundTrip(r)
}

// Tools returns the servers' tools, sorted by name.
func (s *Set) Tools() []tool.Tool {
	s.mu.Lock()
	defer s.mu.Unlock()
	// A server that echoes a secret value (its environment, a config
	// file) has it replaced before the model or the journal sees it.
	out := builtin.RedactTools(s.tools)
	sort.Slice(out, func(i, j int) bool { return out[i].Spec().Name < out[j].Spec().Name })
	return out
}

// Servers lists the connected server names.
func (s *Set) Servers() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n []string
	for k := range s.sessions {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

// Close shuts every server down (stdio servers are terminated).
func (s *Set) Close() error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	sessions := s.sessions
	s.sessions = map[string]*sdk.ClientSession{}
	s.closed = true
	s.mu.Unlock()
	var errs []error
	for name, cs := range sessions {
		if err := cs.Close(); err != nil && !isClosedErr(err) {
			errs = append(errs, fmt.Errorf("MCP server %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

func isClosedErr(err error) bool {
	s := err.Error()
	return strings.Contains(s, "closed") || strings.Contains(s, "signal: terminated") || strings.Contains(s, "signal: killed")
}

// Notes says, one sentence per event, which servers stopped during the
// run and whether they were restarted; the run's result carries them.
func (s *Set) Notes() []string {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.notes...)
}

// session is srv's live session; an error once the set is closed or the
// server stopped and could not be restarted.
func (s *Set) session(srv *server) (*sdk.ClientSession, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("MCP server %s: %w", srv.name, sdk.ErrConnectionClosed)
	}
	if srv.cs == nil {
		return nil, nil
	}
	return srv.cs, nil
}

// recover handles srv's session failed stopping: the first time, the
// server is restarted; after that (or if the restart fails) its tools stay
// unavailable. It returns what the model is told.
func (s *Set) recover(ctx context.Context, srv *server, failed *sdk.ClientSession, cause error) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if srv.cs != failed {
		if srv.cs == nil {
			return "it could not be restarted; its tools are unavailable for the rest of the run"
		}
		return "it was restarted; its tools can be called again"
	}
	_ = failed.Close()
	delete(s.sessions, srv.name)
	note := ""
	switch {
	case s.closed:
		srv.cs = nil
		return "the run is ending"
	case srv.restarted:
		srv.cs = nil
		note = fmt.Sprintf("MCP server %s stopped again (%v) after its restart; it was not restarted twice and its tools failed with an error for the rest of the run", srv.name, cause)
	default:
		srv.restarted = true
		cs, err := s.restart(ctx, srv)
		if err != nil {
			srv.cs = nil
			note = fmt.Sprintf("MCP server %s stopped during the run (%v) and could not be restarted (%v); its tools failed with an error for the rest of the run", srv.name, cause, err)
		} else {
			srv.cs = cs
			s.sessions[srv.name] = cs
			note = fmt.Sprintf("MCP server %s stopped during the run (%v) and was restarted once", srv.name, cause)
		}
	}
	s.notes = append(s.notes, note)
	if s.opts.Events != nil {
		s.opts.Events.Emit(event.Warning(note))
	}
	if srv.cs != nil {
		return "it was restarted; its tools can be called again"
	}
	return "it could not be restarted; its tools are unavailable for the rest of the run"
}

// restart connects to srv again with its configuration.
func (s *Set) restart(ctx context.Context, srv *server) (*sdk.ClientSession, error) {
	t, err := transport(srv.name, srv.cfg, s.opts)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.timeout)
	defer cancel()
	return s.client.Connect(cctx, t, nil)
}

// stopped reports whether a call failed because the server's connection
// ended (the process exited or crashed), not with a protocol error.
func stopped(err error) bool {
	return errors.Is(err, sdk.ErrConnectionClosed) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, io.ErrClosedPipe) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)
}

// remote is one MCP tool as a capstan tool.
type remote struct {
	spec tool.Spec
	name string // the tool's name on its server
	set  *Set
	srv  *server
}

var unsafeChars = lazyre.New(`[^A-Za-z0-9_-]`)

// ToolName is the capstan name of a server's tool: mcp__<server>__<tool>,
// with characters model APIs reject replaced by '_', at most 64 bytes.
func ToolName(server, name string) string {
	n := Prefix + server + "__" + unsafeChars().ReplaceAllString(name, "_")
	if len(n) > 64 {
		n = n[:64]
	}
	return n
}

func newRemote(server string, t *sdk.Tool, set *Set, srv *server) *remote {
	schema, err := json.Marshal(t.InputSchema)
	if err != nil || len(schema) == 0 || string(schema) == "null" {
		schema = json.RawMessage(`{"type":"object","properties":{}}`)
	}
	desc := t.Description
	if desc == "" {
		desc = t.Title
	}
	return &remote{spec: tool.Spec{Name: ToolName(server, t.Name), Description: desc, InputSchema: schema}, name: t.Name, set: set, srv: srv}
}

// Spec implements tool.Tool.
func (r *remote) Spec() tool.Spec { return r.spec }

// Kind implements tool.Tool: MCP tools reach outside the work dir.
func (r *remote) Kind() tool.Kind { return tool.KindExecute }

// Idempotent implements tool.Idempotent: the server's config says
// `idempotent: true`.
func (r *remote) Idempotent() bool { return r.srv != nil && r.srv.cfg.Idempotent }

// Run calls the tool on its server. A tool-level failure is an error
// result the model reads; a protocol failure is returned as an error.
func (r *remote) Run(ctx context.Context, input json.RawMessage) (tool.Result, error) {
	var args map[string]any
	if len(input) > 0 {
		if err := json.Unmarshal(input, &args); err != nil {
			return tool.Result{Content: "input must be a JSON object: " + err.Error(), IsError: true}, nil
		}
	}
	if args == nil {
		args = map[string]any{}
	}
	cs, err := r.set.session(r.srv)
	if err != nil {
		return tool.Result{}, err
	}
	if cs == nil {
		return tool.Result{IsError: true, Content: fmt.Sprintf("MCP server %s stopped earlier in the run and could not be restarted; its tools are unavailable", r.srv.name)}, nil
	}
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: r.name, Arguments: args})
	if err != nil && ctx.Err() == nil && stopped(err) {
		// The server stopped (crashed, exited) during the call. The call
		// is not repeated: it may be what stopped the server.
		what := r.set.recover(ctx, r.srv, cs, err)
		return tool.Result{IsError: true, Content: fmt.Sprintf("MCP server %s stopped during this call (%v); %s", r.srv.name, err, what)}, nil
	}
	if err != nil {
		return tool.Result{}, err
	}
	return tool.Result{Content: render(res), IsError: res.IsError}, nil
}

// render turns a tool result into text for the model.
func render(res *sdk.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		switch v := c.(type) {
		case *sdk.TextContent:
			parts = append(parts, v.Text)
		case *sdk.ImageContent:
			parts = append(parts, fmt.Sprintf("[image %s, %d bytes]", v.MIMEType, len(v.Data)))
		case *sdk.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio %s, %d bytes]", v.MIMEType, len(v.Data)))
		case *sdk.ResourceLink:
			parts = append(parts, fmt.Sprintf("[resource %s]", v.URI))
		case *sdk.EmbeddedResource:
			if v.Resource != nil && v.Resource.Text != "" {
				parts = append(parts, v.Resource.Text)
			} else if v.Resource != nil {
				parts = append(parts, fmt.Sprintf("[resource %s]", v.Resource.URI))
			}
		default:
			if b, err := c.MarshalJSON(); err == nil {
				parts = append(parts, string(b))
			}
		}
	}
	if len(parts) == 0 && res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			parts = append(parts, string(b))
		}
	}
	return strings.Join(parts, "\n")
}
