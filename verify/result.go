package verify

import "github.com/capstan-dev/capstan/event"

// ValidationResult says whether the completion conditions hold (defined
// with the run's events: the completion.check event carries it).
type ValidationResult = event.ValidationResult

// ValidatorRun is one command validator's run.
type ValidatorRun = event.ValidatorRun

// ValidatorOutput is what one validator run produced.
type ValidatorOutput = event.ValidatorOutput
