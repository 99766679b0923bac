package agenterr

// CodeWorkDirBusy: another capstan run works in the work dir (it holds the
// work dir's lock); a second run would race it over the files, the
// commits and the validators' verdicts.
const CodeWorkDirBusy = "WORKDIR_BUSY"
