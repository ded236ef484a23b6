package runtime

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestParseSpecErrors(t *testing.T) {
	good := `{"ociVersion":"1.0.2","root":{"path":"rootfs"},"process":{"cwd":"/","args":["sh"]}}`
	if _, err := ParseSpec([]byte(good)); err != nil {
		t.Fatalf("good spec: %v", err)
	}
	for name, tc := range map[string]struct{ in, want string }{
		"truncated":  {good[:40], "unexpected end of input"},
		"null":       {"null", "config cannot be null"},
		"no root":    {`{"process":{"cwd":"/","args":["sh"]}}`, "root.path"},
		"no process": {`{"root":{"path":"r"}}`, "process property must not be empty"},
		"rel cwd":    {`{"root":{"path":"r"},"process":{"cwd":"x","args":["sh"]}}`, "process.cwd"},
		"no args":    {`{"root":{"path":"r"},"process":{"cwd":"/"}}`, "process.args"},
		"wrong type": {`{"root":{"path":"r"},"process":{"cwd":"/","args":"sh"}}`, "field process.args"},
		"syntax":     {"{\n\"root\": ,}", "line 2"},
		"trailing":   {good + "{}", "trailing data"},
	} {
		_, err := ParseSpec([]byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to contain %q", name, err, tc.want)
		}
	}
}

func TestLoadBundleNamesFile(t *testing.T) {
	dir := t.TempDir()
	if _, err := LoadBundle(dir); err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "config.json")) {
		t.Fatalf("missing config: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadBundle(dir); err == nil || !strings.Contains(err.Error(), "config.json") {
		t.Fatalf("bad config: %v", err)
	}
}

// TestLoadBundleFIFO: a FIFO planted as config.json is refused at once,
// naming the file (it used to block the runtime forever on open).
func TestLoadBundleFIFO(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, "config.json"), 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := LoadBundle(dir); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "config.json: not a regular file") {
			t.Fatalf("FIFO config: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("LoadBundle blocked on a FIFO config.json")
	}
}
