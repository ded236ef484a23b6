package runtime

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// ConfigName is the name of the OCI configuration inside a bundle.
const ConfigName = "config.json"

// maxConfigSize bounds config.json: real configs are a few KiB, and a
// runtime that reads an unbounded file on behalf of a caller is a DoS.
const maxConfigSize = 16 << 20

// LoadBundle reads and checks <bundle>/config.json. Errors name the file
// and, for JSON errors, the byte offset.
func LoadBundle(bundle string) (*specs.Spec, error) {
	path := filepath.Join(bundle, ConfigName)
	// O_NONBLOCK: a FIFO planted as config.json must not block the
	// runtime; it is refused below.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("JSON specification file %s not found", path)
		}
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file (mode %s)", path, fi.Mode().Type())
	}
	data, err := io.ReadAll(io.LimitReader(f, maxConfigSize+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(data) > maxConfigSize {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, maxConfigSize)
	}
	spec, err := ParseSpec(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return spec, nil
}

// ParseSpec decodes an OCI runtime spec and checks the fields every
// runtime needs before it can act.
func ParseSpec(data []byte) (*specs.Spec, error) {
	var spec *specs.Spec
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&spec); err != nil {
		return nil, jsonError(data, err)
	}
	if dec.More() {
		return nil, errors.New("invalid JSON: trailing data after the configuration object")
	}
	if spec == nil {
		return nil, errors.New("config cannot be null")
	}
	if spec.Root == nil || spec.Root.Path == "" {
		return nil, errors.New("root.path: must be set")
	}
	if err := ValidateProcess(spec.Process); err != nil {
		return nil, err
	}
	return spec, nil
}

// ValidateProcess checks a process the way runc does, naming the field.
func ValidateProcess(p *specs.Process) error {
	if p == nil {
		return errors.New("process property must not be empty")
	}
	if p.Cwd == "" {
		return errors.New("process.cwd: must not be empty")
	}
	if !filepath.IsAbs(p.Cwd) {
		return fmt.Errorf("process.cwd: %q must be an absolute path", p.Cwd)
	}
	if len(p.Args) == 0 {
		return errors.New("process.args: must not be empty")
	}
	return nil
}

// jsonError adds the line and column to a JSON decoding error.
func jsonError(data []byte, err error) error {
	var off int64 = -1
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		off = se.Offset
	case errors.As(err, &te):
		off = te.Offset
		if te.Field != "" {
			return fmt.Errorf("invalid JSON: field %s: cannot use %s as %s (line %d)", te.Field, te.Value, te.Type, lineOf(data, off))
		}
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("invalid JSON: unexpected end of input (truncated file?)")
	}
	if off >= 0 {
		return fmt.Errorf("invalid JSON at line %d: %w", lineOf(data, off), err)
	}
	return fmt.Errorf("invalid JSON: %w", err)
}

func lineOf(data []byte, off int64) int {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	return bytes.Count(data[:off], []byte("\n")) + 1
}

// IsBind reports whether m is a bind mount: of type "bind", or with a
// "bind" or "rbind" option.
func IsBind(m specs.Mount) bool {
	if m.Type == "bind" {
		return true
	}
	for _, o := range m.Options {
		if o == "bind" || o == "rbind" {
			return true
		}
	}
	return false
}
