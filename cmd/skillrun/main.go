// Command skillrun is a runc-compatible OCI runtime and a sandboxed runner
// for AI agent skills.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	catchIgnored()
	os.Exit(run(os.Args, os.Stdin, os.Stdout, os.Stderr))
}

// catchIgnored keeps an ignored SIGHUP or SIGINT of skillrun's caller
// (nohup, a shim or service started with them ignored) from reaching the
// containers: Go leaves those two ignored when they were at start, an
// ignored signal stays ignored across fork and exec, and a container's
// process cannot trap a signal ignored at its start (POSIX shells say
// so). runc catches every signal, so its containers start with the
// default action; so do skillrun's: the signals are caught (and dropped,
// as ignored ones would be) and every child starts with the default.
func catchIgnored() {
	for _, s := range []os.Signal{syscall.SIGHUP, syscall.SIGINT} {
		if signal.Ignored(s) {
			signal.Notify(make(chan os.Signal, 1), s)
		}
	}
}
