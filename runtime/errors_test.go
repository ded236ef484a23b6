package runtime

import (
	"errors"
	"strings"
	"testing"
)

func TestValidateID(t *testing.T) {
	good := []string{"a", "abc-123", "A_b+c.d", strings.Repeat("x", MaxIDLength), "..a", "a.."}
	for _, id := range good {
		if err := ValidateID(id); err != nil {
			t.Errorf("ValidateID(%q) = %v, want nil", id, err)
		}
	}
	bad := []string{"", ".", "..", "a/b", "../x", "a\x00b", strings.Repeat("x", MaxIDLength+1), "héllo", "a b", "a\nb"}
	for _, id := range bad {
		err := ValidateID(id)
		if !errors.Is(err, ErrInvalidID) {
			t.Errorf("ValidateID(%q) = %v, want ErrInvalidID", id, err)
		}
	}
}

func TestSentinelWording(t *testing.T) {
	// containerd's shim matches this text; it must not drift.
	for err, want := range map[error]string{
		ErrNotExist:   "container does not exist",
		ErrNotRunning: "container not running",
		ErrExist:      "container with given ID already exists",
	} {
		if err.Error() != want {
			t.Errorf("%v != %q", err, want)
		}
	}
}
