package verify

// CannotCompleteMarker starts the line with which the model declares that
// the task cannot be done as specified (detected by the verdict; the
// guards' retry prompts tell the model about it):
//
//	CANNOT_COMPLETE: the test expects Add(2, 3) == 6, which contradicts "Add returns the sum"
//	<evidence on the following lines>
const CannotCompleteMarker = "CANNOT_COMPLETE:"
