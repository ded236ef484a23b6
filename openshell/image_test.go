package openshell

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"

	ispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// TestUnpackImage: unpackImage against the test layout, privileged and
// not (umoci's rootless mode, the rootfs owned by the caller, mapped to
// the container's root): it unpacks testImage's layer and returns its
// configuration; a layer that is missing fails.
func TestUnpackImage(t *testing.T) {
	ctx := context.Background()
	layout := testLayout(t)
	rootfs := filepath.Join(t.TempDir(), "rootfs")
	cfg, err := unpackImage(ctx, layout, testImage, rootfs)
	if err != nil {
		t.Fatalf("unpack as uid %d: %v", os.Geteuid(), err)
	}
	want := &ispec.ImageConfig{Env: []string{"IMAGE_VAR=from-image", "PATH=/bin"}, WorkingDir: "/work"}
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("config %+v, want %+v", cfg, want)
	}
	if b, err := os.ReadFile(filepath.Join(rootfs, "etc", "hello")); err != nil || string(b) != "hello\n" {
		t.Errorf("etc/hello: %q, %v", b, err)
	}
	for _, p := range []string{"", "work", "etc/hello"} {
		fi, err := os.Lstat(filepath.Join(rootfs, p))
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != os.Geteuid() || int(st.Gid) != os.Getegid() {
			t.Errorf("%s/%s is owned by %d:%d, want the caller %d:%d", rootfs, p, st.Uid, st.Gid, os.Geteuid(), os.Getegid())
		}
	}
	_, err = unpackImage(ctx, layout, brokenImage, filepath.Join(t.TempDir(), "broken"))
	if err == nil || !strings.HasPrefix(err.Error(), "unpack image "+brokenImage+": ") {
		t.Errorf("broken image: %v", err)
	}
}

// TestCheckImage: the lookups validation relies on.
func TestCheckImage(t *testing.T) {
	ctx := context.Background()
	layout := testLayout(t)
	for _, ref := range []string{testImage, "registry.example/x/busybox:test", brokenImage} {
		if err := checkImage(ctx, layout, ref); err != nil {
			t.Errorf("checkImage(%q): %v", ref, err)
		}
	}
	for _, ref := range []string{"busybox", "test", "nosuch:1", "busybox:other"} {
		if err := checkImage(ctx, layout, ref); !errors.Is(err, errImageNotFound) {
			t.Errorf("checkImage(%q): %v, want errImageNotFound", ref, err)
		}
	}
	want := `no linux/` + goarch() + ` manifest for "otherarch:1"`
	if err := checkImage(ctx, layout, otherArchImage); err == nil || err.Error() != want {
		t.Errorf("checkImage(%q): %v, want %q", otherArchImage, err, want)
	}
	missing := filepath.Join(t.TempDir(), "nolayout")
	if err := checkImage(ctx, missing, testImage); err == nil || !strings.HasPrefix(err.Error(), "open OCI image layout "+missing+": ") {
		t.Errorf("checkImage without a layout: %v", err)
	}
}
