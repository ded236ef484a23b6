// Package skill runs an Agent Skill through a runtime.Runtime and reports
// a machine-readable Result.
//
// Run validates the input against the skill's schema, resolves the sandbox
// policy (manifest plus operator overrides), writes a bundle into a private
// temporary folder, runs it with the input JSON on stdin and stdout/stderr
// captured with size caps, enforces the wall-clock timeout through the
// context (the runtime kills the whole container when it ends), and always
// removes the bundle. Exceeding the output cap cancels the run the same
// way. The process exit codes of the skill runner are the Exit* constants.
package runner
