package openshell

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeTar(t *testing.T, path string, entries []tar.Header, content map[string]string) {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range entries {
		h.Size = int64(len(content[h.Name]))
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(content[h.Name]))
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestImageLayoutArchive: an oci-archive is unpacked into the state
// directory; names that try to leave it ("..", absolute, through a
// symlink, a hard link to a host file) land inside it or are refused; a
// tar without a layout is refused; a directory is used as it is.
func TestImageLayoutArchive(t *testing.T) {
	base := t.TempDir()
	state := filepath.Join(base, "state")
	os.Mkdir(state, 0o700)
	if got, err := imageLayout(state, state); err != nil || got != state {
		t.Fatalf("a directory: %q %v", got, err)
	}
	outside := filepath.Join(base, "outside")
	os.Mkdir(outside, 0o755)
	os.WriteFile(filepath.Join(outside, "secret"), []byte("host"), 0o600)
	rel, _ := filepath.Rel(filepath.Join(state, archiveLayoutDir), outside)
	archive := filepath.Join(base, "img.tar")
	writeTar(t, archive, []tar.Header{
		{Name: "oci-layout", Typeflag: tar.TypeReg},
		{Name: "index.json", Typeflag: tar.TypeReg},
		{Name: "blobs/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "blobs/sha256/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "blobs/sha256/abc", Typeflag: tar.TypeReg},
		{Name: rel + "/dotdot", Typeflag: tar.TypeReg},
		{Name: outside + "/absolute", Typeflag: tar.TypeReg},
		{Name: "link", Typeflag: tar.TypeSymlink, Linkname: outside},
		{Name: "link/through-symlink", Typeflag: tar.TypeReg},
	}, map[string]string{"oci-layout": `{"imageLayoutVersion":"1.0.0"}`, "index.json": `{"schemaVersion":2,"manifests":[]}`, "blobs/sha256/abc": "blob",
		rel + "/dotdot": "x", outside + "/absolute": "x", "link/through-symlink": "x"})
	got, err := imageLayout(archive, state)
	if err != nil {
		t.Fatal(err)
	}
	if got != filepath.Join(state, archiveLayoutDir) {
		t.Errorf("layout at %s", got)
	}
	if b, err := os.ReadFile(filepath.Join(got, "blobs", "sha256", "abc")); err != nil || string(b) != "blob" {
		t.Errorf("blob: %q %v", b, err)
	}
	ents, _ := os.ReadDir(outside)
	if len(ents) != 1 {
		t.Errorf("the archive wrote outside its directory: %v", ents)
	}
	// A hard link to a host file.
	hard := filepath.Join(base, "hard.tar")
	writeTar(t, hard, []tar.Header{
		{Name: "oci-layout", Typeflag: tar.TypeReg},
		{Name: "index.json", Typeflag: tar.TypeReg},
		{Name: "steal", Typeflag: tar.TypeLink, Linkname: filepath.Join(outside, "secret")},
	}, map[string]string{"oci-layout": "{}", "index.json": "{}"})
	if got, err := imageLayout(hard, state); err != nil {
		t.Logf("hard link to a host file: %v", err)
	} else {
		if b, err := os.ReadFile(filepath.Join(got, "steal")); err == nil && string(b) == "host" {
			t.Errorf("a hard link in the archive reaches the host file %s", filepath.Join(outside, "secret"))
		}
	}
	// Not a layout; not a tar.
	notLayout := filepath.Join(base, "nolayout.tar")
	writeTar(t, notLayout, []tar.Header{{Name: "x", Typeflag: tar.TypeReg}}, nil)
	if _, err := imageLayout(notLayout, state); err == nil || !strings.Contains(err.Error(), "not an oci-archive") {
		t.Errorf("a tar without a layout: %v", err)
	}
	junk := filepath.Join(base, "junk")
	os.WriteFile(junk, []byte("not a tar at all, not a tar at all"), 0o644)
	if _, err := imageLayout(junk, state); err == nil {
		t.Error("junk accepted as an oci-archive")
	}
	if left, _ := filepath.Glob(filepath.Join(state, archiveLayoutDir+".tmp-*")); len(left) != 0 {
		t.Errorf("temporary directories left: %v", left)
	}
}
