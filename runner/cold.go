package runner

import (
	"bytes"
	"context"
	"io"
	"time"

	"github.com/skillrun/skillrun/runtime"
	"github.com/skillrun/skillrun/spec"
)

// Run runs skill sk with in (nil: the empty input, checked like any)
// through rt, in a cold sandbox: the plan, the container with the input
// on stdin from the start and the wall-clock limit counted from the
// launch, and the outcome. With opts.Command, the command runs instead of
// the entry point and in is not checked (nil: {}); with opts.Exec, in is
// not used (the command reads opts.Exec.Stdin). A skill without an entry
// point runs only commands: without one, Run returns an *InputError.
//
// A policy refusal is a Result with StoppedReason "policy", not an error;
// bad input is an *InputError; other errors are skillrun failures. The
// bundle folder and the container are always removed.
func Run(ctx context.Context, rt runtime.Runtime, sk *spec.Skill, in *Input, opts Options) (*Result, error) {
	var argv []string
	data := []byte("{}")
	var stdin io.Reader
	switch {
	case opts.Exec != nil:
		stdin = opts.Exec.Stdin
		if stdin == nil {
			stdin = bytes.NewReader(nil)
		}
	case !sk.HasEntry() && opts.Command == nil:
		return nil, &InputError{Err: sk.NoEntryError()}
	case opts.Command != nil:
		if in != nil {
			data = in.data
		}
	default:
		if in == nil {
			var err error
			if in, err = NewInput(sk, nil); err != nil {
				return nil, err
			}
		}
		argv, data = in.argv, in.data
	}
	c, refused, err := newContainer(ctx, rt, sk, argv, opts, false)
	if err != nil || refused != nil {
		return refused, err
	}
	defer func() {
		c.stop()
		c.cleanup()
	}()
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	c.runCtx, c.cancel = runCtx, cancel
	c.start = time.Now()
	stop, err := c.startTimeout()
	if err != nil {
		return nil, err
	}
	defer stop()
	c.ran = true
	if stdin == nil {
		stdin = bytes.NewReader(data)
	}
	c.run(stdin, nil)
	return c.outcome(ctx, time.Since(c.start), c.status, c.runErr)
}
