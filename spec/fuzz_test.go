package spec

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// FuzzParseSkillMD checks properties of the SKILL.md parser, not only
// that it does not panic: every error is one line naming SKILL.md; a
// successful parse of a name gives the fields back, and writing them out
// again parses to the same skill (round trip).
func FuzzParseSkillMD(f *testing.F) {
	for _, s := range []string{
		okSkillMD,
		"---\nname: demo\ndescription: d\nlicense: MIT\ncompatibility: py\nmetadata:\n  a: b\nallowed-tools: Read Bash\n---\nbody\n",
		"---\nname: demo\ndescription: d\nallowed-tools: [Read, 1]\n---\n",
		"---\r\nname: demo\r\ndescription: d\r\n---\r\n",
		"\ufeff---\nname: demo\ndescription: d\n---",
		"---\nname: [\n---\n",
		"---\nname: Bad--Name-\n---\n",
		"no front matter",
		"---\nname: demo\n",
		"---\n---\n",
		"---\nmetadata: {\"a\\nb\": [1]}\n---\n",
		"---\na: &a [x]\nb: [*a, *a]\n---\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s := &Skill{}
		errs := s.parseSkillMD(data, "demo")
		for _, err := range errs {
			msg := err.Error()
			if strings.ContainsAny(msg, "\n\r") {
				t.Fatalf("multi-line error %q", msg)
			}
			if !strings.HasPrefix(msg, SkillFile+": ") {
				t.Fatalf("error does not name %s: %q", SkillFile, msg)
			}
		}
		if len(errs) > 0 {
			return
		}
		// (A name other than the folder's is a warning, not an error.)
		if checkName(s.Name) != nil || strings.TrimSpace(s.Description) == "" {
			t.Fatalf("parse succeeded with name %q description %q", s.Name, s.Description)
		}
		// Round trip: write the parsed fields as front matter again.
		fm := map[string]any{"name": s.Name, "description": s.Description}
		if s.License != "" {
			fm["license"] = s.License
		}
		if s.Compatibility != "" {
			fm["compatibility"] = s.Compatibility
		}
		if len(s.Metadata) > 0 {
			fm["metadata"] = s.Metadata
		}
		if len(s.AllowedTools) > 0 {
			fm["allowed-tools"] = s.AllowedTools
		}
		out, err := yaml.Marshal(fm)
		if err != nil {
			t.Fatalf("marshal %v: %v", fm, err)
		}
		again := &Skill{}
		if errs := again.parseSkillMD([]byte("---\n"+string(out)+"---\n"+s.Body), "demo"); len(errs) > 0 {
			t.Fatalf("round trip of %q failed: %v", out, errors.Join(errs...))
		}
		s.Body, again.Body = "", ""
		if len(s.Metadata) == 0 {
			s.Metadata = nil
		}
		if len(again.Metadata) == 0 {
			again.Metadata = nil
		}
		if len(s.AllowedTools) == 0 {
			s.AllowedTools = nil
		}
		if len(again.AllowedTools) == 0 {
			again.AllowedTools = nil
		}
		if !reflect.DeepEqual(s, again) {
			t.Fatalf("round trip changed the skill:\n%+v\n%+v", s, again)
		}
	})
}

// FuzzManifest checks the sandbox manifest parser: errors are one line
// naming sandbox.yaml (each joined problem on its own line); a manifest
// that parses re-encodes to YAML that parses to the same manifest.
func FuzzManifest(f *testing.F) {
	for _, s := range []string{
		"",
		"entry: scripts/transform.mjs\nargs: [\"--quiet\"]\ninput:\n  schema: schema.json\n  mode: stdin\nnetwork:\n  hosts: [api.github.com:443]\nfilesystem:\n  workspace: required\n  writable: [/var/cache/app]\nlimits:\n  memory: 256Mi\n  cpus: 0.5\n  pids: 32\n  timeout: 10s\n  scratch: 64Mi\n  output: 1Mi\nenv: [API_TOKEN]\n",
		"limits:\n  memroy: 1G\n",
		"limits:\n  memory: [1]\n  timeout: {a: 1}\n",
		"entry: ../x\nenv: [PATH, 9X]\n",
		"limits: [\n",
		"limits:\n  memory: 99999999999999999999T\n",
		"a: &a [x]\nb: *a\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseManifest(data)
		if err != nil {
			for _, line := range strings.Split(err.Error(), "\n") {
				if !strings.HasPrefix(line, ManifestFile+": ") || strings.Contains(line, "\r") {
					t.Fatalf("error line does not name %s or is not one line: %q", ManifestFile, line)
				}
			}
			return
		}
		out, err := yaml.Marshal(manifestYAML(m))
		if err != nil {
			t.Fatalf("marshal %+v: %v", m, err)
		}
		again, err := ParseManifest(out)
		if err != nil {
			t.Fatalf("round trip of %q: %v", out, err)
		}
		if !reflect.DeepEqual(normManifest(m), normManifest(again)) {
			t.Fatalf("round trip changed the manifest:\n%+v\n%+v\n%s", m, again, out)
		}
	})
}

// manifestYAML writes m back in sandbox.yaml's own spelling (sizes in
// bytes, durations as Go durations).
func manifestYAML(m Manifest) map[string]any {
	out := map[string]any{
		"input":      map[string]any{"schema": m.Input.Schema, "mode": m.Input.Mode},
		"network":    map[string]any{"hosts": m.Network.Hosts},
		"filesystem": map[string]any{"workspace": m.Filesystem.Workspace, "writable": m.Filesystem.Writable},
		"env":        m.Env,
		"entry":      m.Entry,
		"args":       m.Args,
	}
	l := map[string]any{"cpus": m.Limits.CPUs, "pids": m.Limits.Pids}
	if m.Limits.Memory != 0 {
		l["memory"] = int64(m.Limits.Memory)
	}
	if m.Limits.Scratch != 0 {
		l["scratch"] = int64(m.Limits.Scratch)
	}
	if m.Limits.Output != 0 {
		l["output"] = int64(m.Limits.Output)
	}
	if m.Limits.Timeout != 0 {
		l["timeout"] = time.Duration(m.Limits.Timeout).String()
	}
	out["limits"] = l
	return out
}

// normManifest makes empty lists nil (YAML cannot tell them apart).
func normManifest(m Manifest) Manifest {
	for _, l := range []*[]string{&m.Args, &m.Network.Hosts, &m.Filesystem.Writable, &m.Env} {
		if len(*l) == 0 {
			*l = nil
		}
	}
	return m
}
