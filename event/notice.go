package event

// WarningEvent is something the user should know that does not stop the
// run: an inert setting, a renewed session, a skipped output line.
type WarningEvent struct {
	Message string `json:"message"`
	// SessionID is the session the warning is about, when there is one.
	SessionID string `json:"session_id,omitempty"`
}

// Warning is a WarningEvent with message msg.
func Warning(msg string) WarningEvent { return WarningEvent{Message: msg} }

// LifecycleEvent is a change of the agent's lifecycle state ("started",
// "stopped").
type LifecycleEvent struct {
	State string `json:"state"`
}

// EventKind implements Payload.
func (WarningEvent) EventKind() Kind { return KindWarning }

// EventKind implements Payload.
func (LifecycleEvent) EventKind() Kind { return KindLifecycle }
