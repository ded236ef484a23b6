package runtime

import (
	"errors"
	"fmt"
)

// Sentinel errors, worded exactly as libcontainer words them: containerd's
// shim and podman match on this text.
var (
	ErrExist      = errors.New("container with given ID already exists")
	ErrInvalidID  = errors.New("invalid container ID format")
	ErrNotExist   = errors.New("container does not exist")
	ErrPaused     = errors.New("container paused")
	ErrRunning    = errors.New("container still running")
	ErrNotRunning = errors.New("container not running")
	ErrNotPaused  = errors.New("container not paused")
	// ErrNotSupported is returned by back ends for verbs their platform
	// cannot do; the message names the verb and platform.
	ErrNotSupported = errors.New("not supported")
)

// MaxIDLength bounds container IDs: the ID names a directory, a lock file
// and a cgroup, so it must fit in one file name (NAME_MAX).
const MaxIDLength = 255

// ValidateID checks a container ID: 1 to MaxIDLength characters from
// [A-Za-z0-9_+.-], not "." or "..". This is libcontainer's alphabet, so an
// ID valid here is valid for runc and the state directory cannot escape
// the root.
func ValidateID(id string) error {
	if id == "" {
		return fmt.Errorf("%w: container id cannot be empty", ErrInvalidID)
	}
	if len(id) > MaxIDLength {
		return fmt.Errorf("%w: container id is %d bytes long, at most %d allowed", ErrInvalidID, len(id), MaxIDLength)
	}
	if id == "." || id == ".." {
		return fmt.Errorf("%w: %q", ErrInvalidID, id)
	}
	for i, c := range id {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '_', c == '+', c == '-', c == '.':
		default:
			return fmt.Errorf("%w: %q has character %q at byte %d (allowed: A-Z a-z 0-9 _ + - .)", ErrInvalidID, id, c, i)
		}
	}
	return nil
}

// NotSupportedError reports a verb a platform cannot do.
func NotSupportedError(verb, platform string) error {
	return fmt.Errorf("%s is %w on %s", verb, ErrNotSupported, platform)
}
