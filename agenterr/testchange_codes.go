package agenterr

// Codes of a request of the model to change a protected file
// (runner.verification.testChanges).
const (
	// CodeTestChangeRequested: the run stopped until a human approves or
	// rejects the model's request (capstan approve / capstan reject).
	CodeTestChangeRequested = "TEST_CHANGE_REQUESTED"
	// CodeTestChangeUndecided: a run that waits for a decision on a test
	// change was resumed before anyone decided.
	CodeTestChangeUndecided = "TEST_CHANGE_UNDECIDED"
)

// CodeCleanRunDiffers: the test validators, run once more after the
// model's last turn in a clean environment, did not confirm the
// verification that completed the run.
const CodeCleanRunDiffers = "CLEAN_RUN_DIFFERS"
