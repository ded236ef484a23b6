//go:build integration

package clients_test

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// ociImageArchive writes a single-layer OCI image archive (an OCI layout in a
// tar, what `ctr images import` takes) of rootfs to path, named ref. No
// registry, no download.
func ociImageArchive(t *testing.T, rootfs, ref, path string, cmd []string) {
	t.Helper()
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	err := filepath.WalkDir(rootfs, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(rootfs, p)
		if err != nil || rel == "." {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		if info.Mode()&os.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		}
		hdr, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return err
		}
		hdr.Name = rel
		if d.IsDir() {
			hdr.Name += "/"
		}
		hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "", ""
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if info.Mode().IsRegular() {
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = io.Copy(tw, f)
			return err
		}
		return nil
	})
	if err == nil {
		err = tw.Close()
	}
	if err != nil {
		t.Fatalf("build image layer: %v", err)
	}

	type desc struct {
		MediaType   string            `json:"mediaType"`
		Digest      string            `json:"digest"`
		Size        int               `json:"size"`
		Annotations map[string]string `json:"annotations,omitempty"`
	}
	blobs := map[string][]byte{}
	add := func(mediaType string, b []byte) desc {
		sum := sha256.Sum256(b)
		d := desc{MediaType: mediaType, Digest: "sha256:" + hex.EncodeToString(sum[:]), Size: len(b)}
		blobs[hex.EncodeToString(sum[:])] = b
		return d
	}
	mustJSON := func(v any) []byte {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	layerDesc := add("application/vnd.oci.image.layer.v1.tar", layer.Bytes())
	config := map[string]any{
		"architecture": "amd64",
		"os":           "linux",
		"config":       map[string]any{"Env": []string{"PATH=/bin"}, "Cmd": cmd, "WorkingDir": "/"},
		"rootfs":       map[string]any{"type": "layers", "diff_ids": []string{layerDesc.Digest}},
	}
	configDesc := add("application/vnd.oci.image.config.v1+json", mustJSON(config))
	manifest := map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"config":        configDesc,
		"layers":        []desc{layerDesc},
	}
	manifestDesc := add("application/vnd.oci.image.manifest.v1+json", mustJSON(manifest))
	manifestDesc.Annotations = map[string]string{
		"io.containerd.image.name":          ref,
		"org.opencontainers.image.ref.name": ref,
	}
	index := map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.index.v1+json",
		"manifests":     []desc{manifestDesc},
	}

	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := tar.NewWriter(f)
	write := func(name string, b []byte) {
		if err := out.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := out.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	write("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`))
	write("index.json", mustJSON(index))
	for hexsum, b := range blobs {
		write("blobs/sha256/"+hexsum, b)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
