package openshell

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestUnpackImage: unpackImage against the test layout. Privileged, it
// unpacks testImage's layer and returns its configuration (the one
// stubUnpack returns); unprivileged, it fails today: umoci's rootless mode
// is asked for without ID mappings, so it chowns the rootfs to host uid 0.
func TestUnpackImage(t *testing.T) {
	ctx := context.Background()
	layout := testLayout(t)
	rootfs := filepath.Join(t.TempDir(), "rootfs")
	cfg, err := unpackImage(ctx, layout, testImage, rootfs)
	if os.Geteuid() != 0 {
		want := "unpack image " + testImage + ": chown rootfs: lchown " + rootfs + ": operation not permitted"
		if err == nil || err.Error() != want {
			t.Fatalf("unprivileged unpack: %v, %v; want the error %q", cfg, err, want)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	stub, _ := stubUnpack(ctx, layout, testImage, filepath.Join(t.TempDir(), "stub"))
	if !reflect.DeepEqual(cfg, stub) {
		t.Errorf("config %+v, stubUnpack returns %+v", cfg, stub)
	}
	if b, err := os.ReadFile(filepath.Join(rootfs, "etc", "hello")); err != nil || string(b) != "hello\n" {
		t.Errorf("etc/hello: %q, %v", b, err)
	}
	if fi, err := os.Stat(filepath.Join(rootfs, "work")); err != nil || !fi.IsDir() {
		t.Errorf("work/: %v, %v", fi, err)
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
