package main

import (
	"strings"

	"github.com/urfave/cli/v2"
)

// noReorder are the verbs whose arguments after the container ID belong to
// another program (exec's command, ps' options): runc leaves them alone too
// (urfave/cli's SkipArgReorder).
var noReorder = map[string]bool{"exec": true, "ps": true, "sandbox": true}

// reorderArgs lets a verb's flags follow its positional arguments, as runc
// accepts them (`update ID --cpu-period N`, `delete ID --force`,
// `kill ID KILL -a`): urfave/cli v1, which runc uses, moves a command's
// defined flags (and their values) before its other arguments, up to
// "--"; v2 stops at the first positional argument. Tokens that are not
// flags of the verb stay where they are (`kill ID -9` is not a flag).
// Skill subcommands are reordered by reorderSkillArgs.
func reorderArgs(app *cli.App, args []string) []string {
	i := skipFlags(app.Flags, args, 1)
	if i >= len(args) {
		return args
	}
	if args[i] == "skill" {
		return reorderSkillArgs(app, args)
	}
	cmd := app.Command(args[i])
	if cmd == nil || noReorder[cmd.Name] || len(cmd.Subcommands) > 0 {
		// A verb family (mcp serve): its subcommand parses its own flags.
		return args
	}
	var flags, rest []string
	tail := args[i+1:]
	for k := 0; k < len(tail); k++ {
		a := tail[k]
		if a == "--" {
			rest = append(rest, tail[k:]...)
			break
		}
		if !isFlagOf(cmd.Flags, a) {
			rest = append(rest, a)
			continue
		}
		if name := strings.TrimLeft(a, "-"); name == "h" || name == "help" {
			// `state ID --help`: the verb's help, as runc prints it.
			return append(append([]string(nil), args[:i+1]...), a)
		}
		flags = append(flags, a)
		if takesValue(cmd.Flags, a) && k+1 < len(tail) {
			k++
			flags = append(flags, tail[k])
		}
	}
	out := append(append([]string(nil), args[:i+1]...), flags...)
	return append(out, rest...)
}

// isFlagOf reports whether token ("-x", "--name", "--name=value") is one of
// flags or the help flag.
func isFlagOf(flags []cli.Flag, token string) bool {
	if !strings.HasPrefix(token, "-") || token == "-" {
		return false
	}
	name, _, _ := strings.Cut(strings.TrimLeft(token, "-"), "=")
	if name == "h" || name == "help" {
		return true
	}
	for _, f := range flags {
		for _, n := range f.Names() {
			if n == name {
				return true
			}
		}
	}
	return false
}

// reorderSkillArgs lets flags follow the skill folder, as in
// `skillrun skill bundle DIR -o BUNDLE`: urfave/cli (like Go's flag
// package) stops at the first positional argument, so the flags of a
// `skill` subcommand are moved before its positional arguments. Other
// commands are left alone: `exec ID CMD ARGS...` must pass its tail
// untouched, as runc does.
func reorderSkillArgs(app *cli.App, args []string) []string {
	i := skipFlags(app.Flags, args, 1)
	if i >= len(args) || args[i] != "skill" {
		return args
	}
	var skill *cli.Command
	for _, c := range app.Commands {
		if c.Name == "skill" {
			skill = c
		}
	}
	if skill == nil {
		return args
	}
	j := skipFlags(skill.Flags, args, i+1)
	if j >= len(args) {
		return args
	}
	sub := skill.Command(args[j])
	if sub == nil {
		return args
	}
	var flags, positional []string
	rest := args[j+1:]
	for k := 0; k < len(rest); k++ {
		a := rest[k]
		if a == "--" {
			positional = append(positional, rest[k:]...)
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			positional = append(positional, a)
			if sub.Name == "exec" && len(positional) == 2 {
				// skill exec DIR CMD ARGS...: the command's own flags
				// are not exec's.
				positional = append(positional, rest[k+1:]...)
				break
			}
			continue
		}
		flags = append(flags, a)
		if takesValue(sub.Flags, a) && k+1 < len(rest) {
			k++
			flags = append(flags, rest[k])
		}
	}
	out := append(append([]string(nil), args[:j+1]...), flags...)
	return append(out, positional...)
}

// skipFlags returns the index of the first argument from start that is
// not one of flags (with its value).
func skipFlags(flags []cli.Flag, args []string, start int) int {
	i := start
	for i < len(args) && strings.HasPrefix(args[i], "-") && args[i] != "-" && args[i] != "--" {
		if takesValue(flags, args[i]) {
			i++
		}
		i++
	}
	return i
}

// takesValue reports whether the flag token (without "=value") names a
// defined flag that takes a separate value argument.
func takesValue(flags []cli.Flag, token string) bool {
	if strings.Contains(token, "=") {
		return false
	}
	name := strings.TrimLeft(token, "-")
	for _, f := range flags {
		for _, n := range f.Names() {
			if n != name {
				continue
			}
			if _, ok := f.(*cli.BoolFlag); ok {
				return false
			}
			return true
		}
	}
	return false
}
