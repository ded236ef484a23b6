package runner

import (
	"bytes"
	"context"
	"time"

	"github.com/skillrun/skillrun/runtime"
	"github.com/skillrun/skillrun/spec"
)

// Run runs skill sk with in (nil: the empty input, checked like any)
// through rt, in a cold sandbox: the plan, the container with the input
// on stdin from the start and the wall-clock limit counted from the
// launch, and the outcome. With opts.Command, the command runs instead of
// the entry point and in is not checked (nil: {}).
//
// A policy refusal is a Result with StoppedReason "policy", not an error;
// bad input is an *InputError; other errors are skillrun failures. The
// bundle folder and the container are always removed.
func Run(ctx context.Context, rt runtime.Runtime, sk *spec.Skill, in *Input, opts Options) (*Result, error) {
	var argv []string
	data := []byte("{}")
	switch {
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
	stop := c.startTimeout()
	defer stop()
	c.start, c.ran = time.Now(), true
	c.run(bytes.NewReader(data), nil)
	return c.outcome(ctx, time.Since(c.start), c.status, c.runErr)
}
