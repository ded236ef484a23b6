package openshell

import (
	"context"
	"errors"
	"fmt"
	"os"
	goruntime "runtime"
	"strings"

	ispec "github.com/opencontainers/image-spec/specs-go/v1"
	rspec "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/opencontainers/umoci/oci/cas/dir"
	"github.com/opencontainers/umoci/oci/casext"
	"github.com/opencontainers/umoci/oci/layer"
)

// errImageNotFound is returned when no image of the layout matches a
// reference.
var errImageNotFound = errors.New("image not found")

// refCandidates are the names under which an image reference is looked up
// in the layout's index (org.opencontainers.image.ref.name): the whole
// reference, its last path component, and its tag alone
// ("ghcr.io/a/b:1" -> "ghcr.io/a/b:1", "b:1", "1"); a reference without a
// tag also tries ":latest".
func refCandidates(ref string) []string {
	out := []string{ref}
	base := ref[strings.LastIndex(ref, "/")+1:]
	if i := strings.LastIndex(base, "@"); i >= 0 {
		base = base[:i]
	}
	tag := ""
	if i := strings.LastIndex(base, ":"); i >= 0 {
		tag = base[i+1:]
	} else {
		base += ":latest"
		out = append(out, ref+":latest")
		tag = "latest"
	}
	out = append(out, base, tag)
	seen := map[string]bool{}
	uniq := out[:0]
	for _, c := range out {
		if c != "" && !seen[c] {
			seen[c] = true
			uniq = append(uniq, c)
		}
	}
	return uniq
}

// resolveImage finds the manifest of ref in the OCI image layout at
// layoutDir (for this machine's architecture when the reference names an
// index).
func resolveImage(ctx context.Context, engine casext.Engine, ref string) (ispec.Manifest, error) {
	var paths []casext.DescriptorPath
	for _, name := range refCandidates(ref) {
		if !casext.IsValidReferenceName(name) {
			continue
		}
		p, err := engine.ResolveReference(ctx, name)
		if err != nil {
			return ispec.Manifest{}, err
		}
		if len(p) > 0 {
			paths = p
			break
		}
	}
	if len(paths) == 0 {
		return ispec.Manifest{}, errImageNotFound
	}
	chosen := -1
	for i, p := range paths {
		d := p.Descriptor()
		if d.Platform == nil || (d.Platform.OS == "linux" && d.Platform.Architecture == goruntime.GOARCH) {
			if chosen >= 0 {
				return ispec.Manifest{}, fmt.Errorf("reference %q is ambiguous in the image layout", ref)
			}
			chosen = i
		}
	}
	if chosen < 0 {
		return ispec.Manifest{}, fmt.Errorf("no linux/%s manifest for %q", goruntime.GOARCH, ref)
	}
	blob, err := engine.FromDescriptor(ctx, paths[chosen].Descriptor())
	if err != nil {
		return ispec.Manifest{}, err
	}
	defer blob.Close()
	m, ok := blob.Data.(ispec.Manifest)
	if !ok {
		return ispec.Manifest{}, fmt.Errorf("reference %q is a %s, not an image manifest", ref, blob.Descriptor.MediaType)
	}
	return m, nil
}

// openLayout opens the OCI image layout at layoutDir.
func openLayout(layoutDir string) (casext.Engine, func(), error) {
	e, err := dir.Open(layoutDir)
	if err != nil {
		return casext.Engine{}, nil, fmt.Errorf("open OCI image layout %s: %w", layoutDir, err)
	}
	return casext.NewEngine(e), func() { e.Close() }, nil
}

// checkImage reports whether ref exists in the layout.
func checkImage(ctx context.Context, layoutDir, ref string) error {
	engine, closeFn, err := openLayout(layoutDir)
	if err != nil {
		return err
	}
	defer closeFn()
	_, err = resolveImage(ctx, engine, ref)
	return err
}

// unpackImage unpacks ref's layers into rootfs (umoci: whiteouts, hard
// links and path traversal handled by the library) and returns the
// image's configuration.
func unpackImage(ctx context.Context, layoutDir, ref, rootfs string) (*ispec.ImageConfig, error) {
	engine, closeFn, err := openLayout(layoutDir)
	if err != nil {
		return nil, err
	}
	defer closeFn()
	m, err := resolveImage(ctx, engine, ref)
	if err != nil {
		return nil, err
	}
	opts := &layer.UnpackOptions{OnDiskFormat: layer.DirRootfs{MapOptions: unpackMapOptions()}}
	if err := layer.UnpackRootfs(ctx, engine, rootfs, m, opts); err != nil {
		return nil, fmt.Errorf("unpack image %s: %w", ref, err)
	}
	blob, err := engine.FromDescriptor(ctx, m.Config)
	if err != nil {
		return nil, fmt.Errorf("read image config of %s: %w", ref, err)
	}
	defer blob.Close()
	img, ok := blob.Data.(ispec.Image)
	if !ok {
		return nil, fmt.Errorf("image config of %s has media type %s", ref, blob.Descriptor.MediaType)
	}
	return &img.Config, nil
}

// unpackMapOptions is how files are owned. Privileged, as the layers say.
// Unprivileged, umoci's rootless mode: every file is the caller's (a
// layer's other owners are kept in the user.rootlesscontainers xattr),
// and the rootfs directory itself is chowned to the host ID of the
// container's root, which must be mapped: the rootless container maps
// the caller to root, and so does this.
func unpackMapOptions() layer.MapOptions {
	if os.Geteuid() == 0 {
		return layer.MapOptions{}
	}
	return layer.MapOptions{
		Rootless:    true,
		UIDMappings: []rspec.LinuxIDMapping{{HostID: uint32(os.Geteuid()), ContainerID: 0, Size: 1}},
		GIDMappings: []rspec.LinuxIDMapping{{HostID: uint32(os.Getegid()), ContainerID: 0, Size: 1}},
	}
}
