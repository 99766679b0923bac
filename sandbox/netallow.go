package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/capstan-dev/capstan/agentdir"
)

// ProxyPort is the loopback port, inside a sandbox's own network namespace,
// on which the sandbox accepts connections for its network allow-list
// (Config.NetworkAllow). The namespace is private to the run, so the port
// is always free there.
const ProxyPort = 3128

// allowList is a parsed network allow-list.
type allowList map[string]bool

// newAllowList parses entries; the first bad entry is an error.
func newAllowList(entries []string) (allowList, error) {
	a := allowList{}
	for _, e := range entries {
		c, err := agentdir.ParseNetworkAllow(e)
		if err != nil {
			return nil, err
		}
		a[c] = true
	}
	return a, nil
}

// permits reports whether hostport, as a client asked for it, is listed.
func (a allowList) permits(hostport string) (string, bool) {
	c, err := agentdir.ParseNetworkAllow(hostport)
	if err != nil {
		return hostport, false
	}
	return c, a[c]
}

// netProxy is the filtering proxy behind a sandbox's loopback port: it
// serves HTTP CONNECT tunnels and plain HTTP requests in absolute form
// ("GET http://host:port/path"), to the listed host:port pairs only. It
// runs in capstan, outside the sandbox, and is handed each connection the
// sandbox accepted.
type netProxy struct {
	allow  allowList
	conns  chan net.Conn
	srv    *http.Server
	ctx    context.Context
	cancel context.CancelFunc
	mu     sync.Mutex
	open   map[net.Conn]struct{}
	closed bool
	dialer net.Dialer
}

// newNetProxy starts a proxy for allow; Serve hands it connections, Close
// ends it and every tunnel it holds.
func newNetProxy(allow allowList) *netProxy {
	ctx, cancel := context.WithCancel(context.Background())
	p := &netProxy{allow: allow, conns: make(chan net.Conn), ctx: ctx, cancel: cancel, open: map[net.Conn]struct{}{},
		dialer: net.Dialer{Timeout: 30 * time.Second}}
	transport := &http.Transport{Proxy: nil, DialContext: p.dial, MaxIdleConns: 4, IdleConnTimeout: 30 * time.Second,
		ResponseHeaderTimeout: 5 * time.Minute}
	forward := &httputil.ReverseProxy{
		Rewrite:   func(pr *httputil.ProxyRequest) { pr.Out.URL = pr.In.URL; pr.Out.Host = pr.In.Host },
		Transport: transport,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			http.Error(w, "capstan sandbox proxy: "+err.Error(), http.StatusBadGateway)
		},
	}
	p.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.handle(w, r, forward)
	}), ReadHeaderTimeout: time.Minute, ErrorLog: log.New(io.Discard, "", 0)}
	go func() { _ = p.srv.Serve(proxyListener{p}) }()
	return p
}

// deniedText is what a refused client reads.
func deniedText(hostport string) string {
	return fmt.Sprintf("capstan sandbox: %s is not in runner.boundaries.sandbox.network.allow; only the listed host:port pairs can be reached\n", hostport)
}

// handle serves one proxy request.
func (p *netProxy) handle(w http.ResponseWriter, r *http.Request, forward *httputil.ReverseProxy) {
	if r.Method == http.MethodConnect {
		target, ok := p.allow.permits(r.Host)
		if !ok {
			http.Error(w, deniedText(r.Host), http.StatusForbidden)
			return
		}
		p.tunnel(w, target)
		return
	}
	if !r.URL.IsAbs() || r.URL.Scheme != "http" {
		http.Error(w, "capstan sandbox proxy: send requests in absolute form (http://host:port/path) or use CONNECT", http.StatusBadRequest)
		return
	}
	hostport := r.URL.Host
	if r.URL.Port() == "" {
		hostport = net.JoinHostPort(r.URL.Hostname(), "80")
	}
	if _, ok := p.allow.permits(hostport); !ok {
		http.Error(w, deniedText(hostport), http.StatusForbidden)
		return
	}
	forward.ServeHTTP(w, r)
}

// dial connects to an allowed address only: the plain-HTTP path checks the
// request, and this checks it again at the socket.
func (p *netProxy) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, ok := p.allow.permits(addr)
	if !ok {
		return nil, errors.New(strings.TrimSpace(deniedText(addr)))
	}
	return p.dialer.DialContext(ctx, network, c)
}

// tunnel answers a CONNECT for target and copies bytes both ways.
func (p *netProxy) tunnel(w http.ResponseWriter, target string) {
	up, err := p.dial(p.ctx, "tcp", target)
	if err != nil {
		http.Error(w, "capstan sandbox proxy: "+err.Error(), http.StatusBadGateway)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		up.Close()
		http.Error(w, "capstan sandbox proxy: cannot tunnel", http.StatusInternalServerError)
		return
	}
	down, buf, err := hj.Hijack()
	if err != nil {
		up.Close()
		return
	}
	if !p.track(up) || !p.track(down) {
		up.Close()
		down.Close()
		return
	}
	defer p.untrack(up)
	defer p.untrack(down)
	if _, err := io.WriteString(down, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	done := make(chan struct{}, 2)
	go func() {
		if n := buf.Reader.Buffered(); n > 0 {
			b, _ := buf.Reader.Peek(n)
			_, _ = up.Write(b)
		}
		_, _ = io.Copy(up, down)
		closeWrite(up)
		done <- struct{}{}
	}()
	go func() { _, _ = io.Copy(down, up); closeWrite(down); done <- struct{}{} }()
	<-done
	<-done
}

// closeWrite half-closes c when it can, so the peer sees the end.
func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
}

func (p *netProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.open[c] = struct{}{}
	return true
}

func (p *netProxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.open, c)
	p.mu.Unlock()
	c.Close()
}

// Serve hands the proxy one connection the sandbox accepted; it is closed
// at once when the proxy has ended.
func (p *netProxy) Serve(c net.Conn) {
	select {
	case p.conns <- c:
	case <-p.ctx.Done():
		c.Close()
	}
}

// proxyListener is the net.Listener of the proxy's HTTP server: the
// connections given to Serve.
type proxyListener struct{ p *netProxy }

// Accept returns the next connection given to Serve.
func (l proxyListener) Accept() (net.Conn, error) {
	p := l.p
	select {
	case c := <-p.conns:
		return c, nil
	case <-p.ctx.Done():
		return nil, net.ErrClosed
	}
}

// Close stops Accept.
func (l proxyListener) Close() error { l.p.cancel(); return nil }

// Addr is the sandbox's proxy address.
func (l proxyListener) Addr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: ProxyPort}
}

// Close ends the proxy: its server, and every tunnel still open.
func (p *netProxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	for c := range p.open {
		c.Close()
	}
	p.mu.Unlock()
	p.cancel()
	return p.srv.Close()
}

// proxyEnv is the environment that sends a sandboxed program's HTTP and
// HTTPS requests through the allow-list proxy. NO_PROXY is cleared: a
// program that bypasses the proxy reaches nothing.
func proxyEnv() []string {
	u := "http://127.0.0.1:" + strconv.Itoa(ProxyPort)
	return []string{"HTTP_PROXY=" + u, "HTTPS_PROXY=" + u, "http_proxy=" + u, "https_proxy=" + u,
		"ALL_PROXY=" + u, "all_proxy=" + u, "NO_PROXY=", "no_proxy="}
}
