package runner

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/skillrun/skillrun/spec"
)

// EntryPython, for Prepare: the sandbox starts python3 ahead, interpreter
// initialised, waiting on its stdin for the command it is to run (a warm
// `skill exec` of `python3 SCRIPT ARGS`, `python3 -c CODE ARGS` or
// `python3 -m MODULE ARGS`): a command call then costs no interpreter
// start. CallPython sends it.
const EntryPython StartEntry = EntryCommand + 1

// pythonZygote is the program of an EntryPython sandbox: it imports what
// it needs to run a command (json, runpy, types: ~1.1 ms, before the call
// rather than during it), then reads one
// line from fd 0 (byte by byte: the rest of stdin is the command's), a
// JSON object with the working directory and python3's arguments, and
// runs them as python3 would: sys.argv, sys.path[0] and __main__ as the
// interpreter sets them, the script's own traceback on an uncaught
// exception (the zygote's and runpy's frames left out), exit status 1.
const pythonZygote = `import os, sys
import json, runpy, types
def _skillrun_zygote():
    line = b""
    while not line.endswith(b"\n"):
        c = os.read(0, 1)
        if not c:
            os._exit(125)
        line += c
    req = json.loads(line)
    os.chdir(req["cwd"])
    argv = req["argv"]
    try:
        if argv[0] == "-c":
            sys.argv = ["-c"] + argv[2:]
            sys.path[0] = ""
            main = types.ModuleType("__main__")
            main.__dict__["__builtins__"] = __builtins__
            sys.modules["__main__"] = main
            exec(compile(argv[1], "<string>", "exec"), main.__dict__)
        elif argv[0] == "-m":
            sys.argv = [argv[1]] + argv[2:]
            sys.path[0] = os.getcwd()
            try:
                spec = runpy._get_module_details(argv[1])
            except ImportError as e:
                print("%s: %s" % (sys.executable, e), file=sys.stderr)
                sys.exit(1)
            runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        elif not os.path.exists(argv[0]):
            print("%s: can't open file %r: [Errno 2] No such file or directory" % (sys.executable, os.path.abspath(argv[0])), file=sys.stderr)
            sys.exit(2)
        elif os.path.isfile(argv[0]):
            # As the interpreter runs a script: __file__ absolute,
            # sys.argv[0] as given, the script's folder first on the path.
            path = os.path.abspath(argv[0])
            sys.argv = argv
            sys.path[0] = os.path.dirname(path)
            main = types.ModuleType("__main__")
            main.__dict__.update(__file__=path, __cached__=None, __builtins__=__builtins__)
            sys.modules["__main__"] = main
            with open(path, "rb") as f:
                code = compile(f.read(), path, "exec")
            exec(code, main.__dict__)
        else:
            sys.argv = argv
            sys.path[0] = os.path.abspath(argv[0])
            runpy.run_path(argv[0], run_name="__main__")
    except SystemExit:
        raise
    except BaseException as e:
        import traceback
        tb = e.__traceback__
        while tb is not None and (tb.tb_frame.f_code.co_name == "_skillrun_zygote" or "runpy" in tb.tb_frame.f_code.co_filename):
            tb = tb.tb_next
        traceback.print_exception(type(e), e, tb)
        sys.exit(1)
_skillrun_zygote()
`

// PythonWarmable reports whether args is a command an EntryPython
// sandbox runs as it is: python3 with a script, -c code or -m module
// first, no interpreter option before them.
func PythonWarmable(args []string) bool {
	if len(args) < 2 || args[0] != "python3" {
		return false
	}
	switch a := args[1]; {
	case a == "-c" || a == "-m":
		return len(args) >= 3
	case a == "-" || strings.HasPrefix(a, "-"):
		return false
	}
	return true
}

// CallPython runs e, a PythonWarmable command, in a sandbox prepared with
// EntryPython and launched, with stdin as its input: the same command,
// scripts resolved in the skill, the same result as Run with opts.Exec.
// A command it cannot run is ErrNotWarm (run it cold).
func (s *Sandbox) CallPython(ctx context.Context, e spec.Exec, stdin []byte) (*Result, error) {
	c := s.c
	if s.when != EntryPython {
		return nil, errors.New("sandbox: not prepared for python commands")
	}
	if !PythonWarmable(e.Args) {
		return nil, ErrNotWarm
	}
	args, note := resolveScript(c.plan.sk, c.plan.policy.Workspace, e)
	cwd := e.Cwd
	if cwd == "" {
		cwd = c.plan.policy.Cwd
	} else if err := spec.CheckExecCwd(c.plan.sk, c.plan.policy, cwd); err != nil {
		return nil, &InputError{Err: err}
	}
	head, err := json.Marshal(map[string]any{"cwd": cwd, "argv": args[1:]})
	if err != nil {
		return nil, err
	}
	c.plan.exec = &spec.Exec{Args: args, Cwd: cwd}
	c.base.Command, c.base.Cwd, c.base.Notes = args, cwd, nil
	if note != "" {
		c.base.Notes = []string{note}
	}
	input := append(append(head, '\n'), stdin...)
	return s.call(ctx, nil, input)
}
