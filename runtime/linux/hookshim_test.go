//go:build linux

package linux

import (
	"encoding/json"
	"testing"

	"github.com/opencontainers/runc/libcontainer/configs"
)

func TestWithStatus(t *testing.T) {
	in := `{"ociVersion":"1.2.1","id":"c","status":"creating","pid":42,"bundle":"/b","annotations":{"k":"v"}}`
	out, err := withStatus([]byte(in), "created")
	if err != nil {
		t.Fatal(err)
	}
	var got, want map[string]any
	json.Unmarshal(out, &got)
	json.Unmarshal([]byte(in), &want)
	want["status"] = "created"
	if g, w := mustJSON(t, got), mustJSON(t, want); g != w {
		t.Fatalf("withStatus = %s, want %s", g, w)
	}
	for _, bad := range []string{"", "null", "[]", "{", `"x"`} {
		if _, err := withStatus([]byte(bad), "created"); err == nil {
			t.Errorf("withStatus(%q) accepted a state that is not a JSON object", bad)
		}
	}
}

func TestShimPrestart(t *testing.T) {
	c := &configs.Config{Hooks: configs.Hooks{
		configs.Prestart: {
			configs.NewCommandHook(&configs.Command{Path: "/bin/sh", Args: []string{"h", "a"}, Env: []string{"E=1"}}),
			configs.NewCommandHook(&configs.Command{Path: "/bin/true"}),
			configs.NewCommandHook(&configs.Command{Path: "/nonexistent/hook"}),
		},
		configs.CreateRuntime: {configs.NewCommandHook(&configs.Command{Path: "/cr"})},
	}}
	shimPrestart(c)
	pre := c.Hooks[configs.Prestart]
	want := [][]string{
		{"skillrun-hook", HookStateArg, "created", "/bin/sh", "h", "a"},
		{"skillrun-hook", HookStateArg, "created", "/bin/true", "/bin/true"},
	}
	if p := pre[2].(configs.CommandHook).Command.Path; p != "/nonexistent/hook" {
		t.Errorf("a hook that cannot be executed was wrapped (%s); its error should stay libcontainer's", p)
	}
	for i, h := range pre[:2] {
		cmd := h.(configs.CommandHook).Command
		if cmd.Path != "/proc/self/exe" || mustJSON(t, cmd.Args) != mustJSON(t, want[i]) {
			t.Errorf("prestart hook %d = %s %q, want /proc/self/exe %q", i, cmd.Path, cmd.Args, want[i])
		}
	}
	if env := pre[0].(configs.CommandHook).Command.Env; len(env) != 1 || env[0] != "E=1" {
		t.Errorf("the hook's environment was not kept: %q", env)
	}
	if p := c.Hooks[configs.CreateRuntime][0].(configs.CommandHook).Command.Path; p != "/cr" {
		t.Errorf("createRuntime hook rewritten to %s; only prestart hooks are shimmed", p)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
