package claudecode

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"time"

	"github.com/capstan-dev/capstan/agenterr"
)

// keyProxy keeps the provider key out of a sandboxed CLI: the CLI gets a
// stand-in token and a loopback base URL, and the proxy, which runs in
// capstan outside the sandbox, forwards its requests to the real endpoint
// with the real key in place of the stand-in. Everything the CLI runs (its
// Bash, the model's commands) inherits the CLI's environment, so the
// stand-in is all a model can read or print; it opens nothing but this
// proxy, which lives only as long as the Bridge.
type keyProxy struct {
	// addr is the proxy's loopback host:port.
	addr string
	// token is the stand-in the CLI gets in place of the key.
	token string
	srv   *http.Server
}

// keyVars are the CLI's credential variables, each with the header its
// value travels in: an API key as x-api-key, an auth token as a bearer
// Authorization.
var keyVars = []struct{ name, header string }{
	{"ANTHROPIC_API_KEY", "X-Api-Key"},
	{"ANTHROPIC_AUTH_TOKEN", "Authorization"},
}

// startKeyProxy serves a proxy on loopback that forwards to target,
// replacing the stand-in token with the values of keys (variable name:
// value; the variables of keyVars that are set). A request that does not
// carry the stand-in is refused (401), so another program on the machine
// cannot use the proxy to spend the key.
func startKeyProxy(target *url.URL, keys map[string]string) (*keyProxy, error) {
	raw := make([]byte, 24)
	if _, err := rand.Read(raw); err != nil {
		return nil, agenterr.Wrap(err, agenterr.CodeSandboxSetup, agenterr.LayerSandbox, false, "make the claude CLI's stand-in key")
	}
	token := "capstan-stand-in-" + hex.EncodeToString(raw)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, agenterr.Wrap(err, agenterr.CodeSandboxSetup, agenterr.LayerSandbox, false, "listen for the claude CLI's key proxy")
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = target.Host
			r.Out.Header.Del("X-Api-Key")
			r.Out.Header.Del("Authorization")
			for _, v := range keyVars {
				if val, ok := keys[v.name]; ok {
					if v.header == "Authorization" {
						val = "Bearer " + val
					}
					r.Out.Header.Set(v.header, val)
				}
			}
		},
		// Streamed answers pass through as they come.
		FlushInterval: -1,
	}
	kp := &keyProxy{addr: ln.Addr().String(), token: token}
	kp.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !kp.carriesToken(r) {
				http.Error(w, "capstan key proxy: the request does not carry this run's stand-in key", http.StatusUnauthorized)
				return
			}
			proxy.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: 30 * time.Second,
	}
	go func() {
		if err := kp.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			ln.Close()
		}
	}()
	return kp, nil
}

// carriesToken reports whether r authenticates with the stand-in, in
// either of the CLI's credential headers.
func (kp *keyProxy) carriesToken(r *http.Request) bool {
	got := r.Header.Get("X-Api-Key")
	if got == "" {
		got, _ = strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	}
	return subtle.ConstantTimeCompare([]byte(got), []byte(kp.token)) == 1
}

// URL is the base URL the CLI reaches the proxy at.
func (kp *keyProxy) URL() string { return "http://" + kp.addr }

// Close stops the proxy.
func (kp *keyProxy) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return kp.srv.Shutdown(ctx)
}

// standIn rewrites env (the sandboxed CLI's environment, last entry of a
// variable winning) for the proxy: every credential variable gets the
// stand-in and ANTHROPIC_BASE_URL the proxy's URL.
func (kp *keyProxy) standIn(env []string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN":
			out = append(out, k+"="+kp.token)
		case "ANTHROPIC_BASE_URL":
		default:
			out = append(out, kv)
		}
	}
	return append(out, "ANTHROPIC_BASE_URL="+kp.URL())
}

// credentials are the values of the credential variables set in env.
func credentials(env []string) map[string]string {
	keys := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		for _, kv := range keyVars {
			if k == kv.name && v != "" {
				keys[k] = v
			}
		}
	}
	return keys
}
