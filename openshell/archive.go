package openshell

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/opencontainers/umoci/oci/layer"
)

// archiveLayoutDir is where, under the state directory, an oci-archive
// given as --images is unpacked.
const archiveLayoutDir = "image-archive"

// imageLayout returns the OCI image layout directory images names: the
// directory itself, or, when images is a file, an oci-archive (a tar of an
// OCI image layout, as `skopeo copy ... oci-archive:FILE` writes) unpacked
// afresh into stateDir/image-archive.
//
// The tar is unpacked by umoci's layer extractor, the one that unpacks the
// images' layers: paths are resolved inside the target directory
// (securejoin), so "..", absolute names and symlinks cannot place a file
// outside it, and hard links must point inside it.
func imageLayout(images, stateDir string) (string, error) {
	fi, err := os.Stat(images)
	if err != nil {
		return "", fmt.Errorf("images: %w", err)
	}
	if fi.IsDir() {
		return images, nil
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("images: %s is neither an OCI image layout directory nor an oci-archive file", images)
	}
	f, err := os.Open(images)
	if err != nil {
		return "", fmt.Errorf("images: %w", err)
	}
	defer f.Close()
	final := filepath.Join(stateDir, archiveLayoutDir)
	tmp, err := os.MkdirTemp(stateDir, archiveLayoutDir+".tmp-")
	if err != nil {
		return "", fmt.Errorf("images: %w", err)
	}
	defer os.RemoveAll(tmp)
	opts := &layer.UnpackOptions{OnDiskFormat: layer.DirRootfs{MapOptions: layer.MapOptions{Rootless: os.Geteuid() != 0}}}
	if err := layer.UnpackLayer(tmp, f, opts); err != nil {
		return "", fmt.Errorf("images: unpack oci-archive %s: %w", images, err)
	}
	for _, name := range []string{"oci-layout", "index.json"} {
		if fi, err := os.Lstat(filepath.Join(tmp, name)); err != nil || !fi.Mode().IsRegular() {
			return "", fmt.Errorf("images: %s is not an oci-archive: no %s at its top", images, name)
		}
	}
	if err := os.RemoveAll(final); err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("images: %w", err)
	}
	if err := os.Rename(tmp, final); err != nil {
		return "", fmt.Errorf("images: %w", err)
	}
	return final, nil
}
