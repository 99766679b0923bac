package sandbox

import (
	"github.com/capstan-dev/capstan/agenterr"
)

// Capabilities is what the start-up probe found the machine allows.
type Capabilities struct {
	// Namespaces is true when a child could be started in new user,
	// network, PID, mount, IPC and UTS namespaces.
	Namespaces bool `json:"namespaces"`
	// LandlockABI is the kernel's Landlock ABI version, 0 when Landlock is
	// unavailable.
	LandlockABI int `json:"landlock_abi"`
	// Reason and Hint explain why namespaces are unavailable.
	Reason string `json:"reason,omitempty"`
	Hint   string `json:"hint,omitempty"`
}

// Unavailable returns the SANDBOX_UNAVAILABLE error describing c, or nil
// when namespaces are available.
func (c Capabilities) Unavailable() error {
	if c.Namespaces {
		return nil
	}
	e := agenterr.New(agenterr.CodeSandboxUnavailable, agenterr.LayerSandbox, false,
		"cannot create the sandbox namespaces: %s", c.Reason)
	e.Hint = c.Hint
	return e
}
