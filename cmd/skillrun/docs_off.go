//go:build !gendocs

package main

import "github.com/urfave/cli/v2"

// docsCommands is empty in the shipped binary: the man page and shell
// completion generator (docs_on.go) is built only by make man / make dist.
func docsCommands(*env) []*cli.Command { return nil }
