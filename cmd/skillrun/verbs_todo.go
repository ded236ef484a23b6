package main

import "github.com/urfave/cli/v2"

// Placeholders removed as each verb file lands.
func createCommand(e *env) *cli.Command { return &cli.Command{Name: "create"} }
func deleteCommand(e *env) *cli.Command { return &cli.Command{Name: "delete"} }
func eventsCommand(e *env) *cli.Command { return &cli.Command{Name: "events"} }
func execCommand(e *env) *cli.Command { return &cli.Command{Name: "exec"} }
func featuresCommand(e *env) *cli.Command { return &cli.Command{Name: "features"} }
func killCommand(e *env) *cli.Command { return &cli.Command{Name: "kill"} }
func listCommand(e *env) *cli.Command { return &cli.Command{Name: "list"} }
func pauseCommand(e *env) *cli.Command { return &cli.Command{Name: "pause"} }
func psCommand(e *env) *cli.Command { return &cli.Command{Name: "ps"} }
func resumeCommand(e *env) *cli.Command { return &cli.Command{Name: "resume"} }
func runCommand(e *env) *cli.Command { return &cli.Command{Name: "run"} }
func specCommand(e *env) *cli.Command { return &cli.Command{Name: "spec"} }
func startCommand(e *env) *cli.Command { return &cli.Command{Name: "start"} }
func stateCommand(e *env) *cli.Command { return &cli.Command{Name: "state"} }
func updateCommand(e *env) *cli.Command { return &cli.Command{Name: "update"} }
