package verdict

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/internal/backoff"
)

// Notification is the JSON body of a webhook escalation.
type Notification struct {
	Agent      string `json:"agent"`
	RunID      string `json:"runId"`
	Step       string `json:"step"`
	EscalateTo string `json:"escalateTo,omitempty"`
	Reason     string `json:"reason"`
	Iteration  int    `json:"iteration"`
}

// Notifier delivers escalation notifications outside the agent.
type Notifier interface {
	Notify(ctx context.Context, esc agentdir.Escalation, n Notification) error
}

// Webhook defaults.
const (
	DefaultWebhookTimeout  = 10 * time.Second
	DefaultWebhookAttempts = 3
)

// WebhookNotifier POSTs the notification as JSON to the escalation's
// webhookUrl. Each attempt is bounded by timeoutSeconds (default 10 s);
// failures (network errors, 5xx, 429) are retried with exponential backoff
// up to maxAttempts (default 3); other 4xx statuses are not retried.
type WebhookNotifier struct {
	// Client is the HTTP client (nil = a client without timeout of its own;
	// the per-attempt timeout applies).
	Client *http.Client
	// Backoff is the wait before the second attempt, doubled each time
	// (default 500 ms).
	Backoff time.Duration
}

// Notify implements Notifier. Failure after the last attempt is
// ESCALATION_FAILED.
func (w *WebhookNotifier) Notify(ctx context.Context, esc agentdir.Escalation, n Notification) error {
	client := w.Client
	if client == nil {
		client = &http.Client{}
	}
	timeout := DefaultWebhookTimeout
	if esc.TimeoutSeconds > 0 {
		timeout = time.Duration(esc.TimeoutSeconds) * time.Second
	}
	attempts := esc.MaxAttempts
	if attempts <= 0 {
		attempts = DefaultWebhookAttempts
	}
	wait := backoff.Exponential{Base: w.Backoff}
	if wait.Base <= 0 {
		wait.Base = 500 * time.Millisecond
	}
	body, err := json.Marshal(n)
	if err != nil {
		return err
	}
	var last error
	for i := 1; i <= attempts; i++ {
		retryable, err := w.post(ctx, client, esc.WebhookURL, body, timeout)
		if err == nil {
			return nil
		}
		last = fmt.Errorf("attempt %d: %w", i, err)
		if !retryable || i == attempts {
			break
		}
		if err := backoff.Sleep(ctx, wait.Delay(i, 0)); err != nil {
			return agenterr.Wrap(err, agenterr.CodeCanceled, agenterr.LayerStep, false, "escalation webhook canceled")
		}
	}
	return &agenterr.Error{Code: agenterr.CodeEscalation, Layer: agenterr.LayerStep,
		Message: fmt.Sprintf("escalation of step %q: webhook %s failed", n.Step, esc.WebhookURL),
		Hint:    "check escalation.webhookUrl and that the receiver answers 2xx", Err: last}
}

func (w *WebhookNotifier) post(ctx context.Context, client *http.Client, url string, body []byte, timeout time.Duration) (retryable bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return false, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "capstan")
	resp, err := client.Do(req)
	if err != nil {
		return true, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 == 2 {
		return false, nil
	}
	retry := resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusRequestTimeout
	return retry, fmt.Errorf("status %s", resp.Status)
}
