// Command supervisor stands in for OpenShell's sandbox supervisor in the
// openshell driver tests: it records what it was given (arguments,
// environment, the token file's mode and content, whether its own binary
// can be changed) in <workdir>/supervisor.json, then waits for SIGTERM.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
)

func main() {
	workdir := ""
	if len(os.Args) == 3 && os.Args[1] == "--workdir" {
		workdir = os.Args[2]
	}
	rec := map[string]any{"args": os.Args, "env": os.Environ(), "pid": os.Getpid()}
	if tf := os.Getenv("OPENSHELL_SANDBOX_TOKEN_FILE"); tf != "" {
		if fi, err := os.Stat(tf); err == nil {
			rec["token_mode"] = fmt.Sprintf("%o", fi.Mode().Perm())
		}
		data, err := os.ReadFile(tf)
		rec["token"], rec["token_err"] = string(data), fmt.Sprint(err)
	}
	rec["self_write_err"] = fmt.Sprint(os.Chmod(os.Args[0], 0o777))
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	data, _ := json.Marshal(rec)
	if err := os.WriteFile(filepath.Join(workdir, "supervisor.json"), data, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "supervisor:", err)
		os.Exit(1)
	}
	fmt.Println("supervisor: ready")
	<-sigs
	fmt.Println("supervisor: terminating")
}
