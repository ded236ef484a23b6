// Package holder is the input holder of the skill runner's warm
// sandboxes built into the binary, in C: a container's first process
// started as Args(mode, entry...) (through runtime.SelfExecer) runs it
// before the Go runtime starts, and nothing else of the program.
//
// The holder is the sandbox's pid-namespace init. It starts the entry
// point (at once, at the call's "g", or with the call's command line),
// keeps a copy of the stdin pipe's write end until the launcher says
// the input is complete ("e") so that the entry point never sees the end
// of a cut input, kills the sandbox when the launcher goes away first,
// and when the entry point exits kills what it left running, closes its
// own output, reports the status on the ready pipe and waits for the
// control pipe's end before it exits with that status. runner/warm.go
// describes the protocol; its shell version (holderScript) is what back
// ends that cannot run this binary inside the container use, and the
// runner's tests hold both to the same protocol.
//
// Against the shell, the built-in holder takes 0.1-0.2 ms less between the
// entry point's exit and its report (no interpreter between them: a
// wait, a kill, two closes and a write), and costs one small process
// that never starts the Go runtime (docs/performance.md).
package holder

// Arg is the holder's first argument: the binary runs the holder when
// it is started with it.
const Arg = "skillrun-input-holder"

// Args is the command line that runs the holder in mode ("launch",
// "call" or "cmd") with entry as its entry point, the binary being exe.
func Args(exe, mode string, entry ...string) []string {
	return append([]string{exe, Arg, mode}, entry...)
}
