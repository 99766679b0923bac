package sandbox

import (
	"strings"

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

// landlockMissing and landlockHint name a missing Landlock.
const (
	landlockMissing = "Landlock is not available (kernel < 5.13, or landlock missing from the lsm= boot list)"
	landlockHint    = "boot a kernel with CONFIG_SECURITY_LANDLOCK=y and landlock in lsm="
)

// Sandboxes reports whether the machine can sandbox: namespaces and
// Landlock both work.
func (c Capabilities) Sandboxes() bool { return c.Namespaces && c.LandlockABI > 0 }

// Missing names what the machine lacks to sandbox, "" when nothing.
func (c Capabilities) Missing() string {
	var parts []string
	if !c.Namespaces {
		parts = append(parts, c.Reason)
	}
	if c.LandlockABI == 0 {
		parts = append(parts, landlockMissing)
	}
	return strings.Join(parts, "; ")
}

// Unavailable returns the SANDBOX_UNAVAILABLE error naming what the
// machine lacks (namespaces, Landlock) and the setting to change, or nil
// when it can sandbox. Callers add how to opt out in their own words.
func (c Capabilities) Unavailable() error {
	if c.Sandboxes() {
		return nil
	}
	e := agenterr.New(agenterr.CodeSandboxUnavailable, agenterr.LayerSandbox, false,
		"this machine cannot sandbox: %s", c.Missing())
	var hints []string
	if !c.Namespaces && c.Hint != "" {
		hints = append(hints, c.Hint)
	}
	if c.LandlockABI == 0 {
		hints = append(hints, landlockHint)
	}
	e.Hint = strings.Join(hints, "; ")
	return e
}
