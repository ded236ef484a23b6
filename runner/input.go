package runner

import (
	"bytes"

	"github.com/skillrun/skillrun/spec"
)

// Input is a skill's input, checked once against the skill's schema: the
// JSON object its entry point reads on stdin, and the command-line
// arguments derived from it (input mode argv). Make one with NewInput;
// the cold and the warm path take it as it is.
type Input struct {
	data []byte
	argv []string
}

// NewInput checks raw (a JSON object; empty or only whitespace means {})
// against sk's input schema. A bad input is an *InputError.
func NewInput(sk *spec.Skill, raw []byte) (*Input, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = []byte("{}")
	}
	obj, err := sk.ValidateInput(raw)
	if err != nil {
		return nil, &InputError{Err: err}
	}
	argv, err := sk.Argv(obj)
	if err != nil {
		return nil, &InputError{Err: err}
	}
	return &Input{data: raw, argv: argv}, nil
}

// Bytes returns the input document as the entry point reads it.
func (in *Input) Bytes() []byte { return in.data }

// Argv returns the command-line arguments derived from the input (input
// mode argv; nil otherwise).
func (in *Input) Argv() []string { return in.argv }
