package spec

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/skillrun/skillrun/egress/policy"
	"github.com/skillrun/skillrun/internal/lazyre"
)

// ManifestFile is the sandbox manifest's file name, next to SKILL.md. A
// sidecar file keeps SKILL.md valid under the Agent Skills specification.
const ManifestFile = "sandbox.yaml"

// Input modes: how the runner hands the input to the entry point.
const (
	// InputStdin writes the input JSON to the entry point's stdin.
	InputStdin = "stdin"
	// InputArgv also converts the input object to command-line arguments
	// (see Skill.Argv); the JSON is still written to stdin.
	InputArgv = "argv"
)

// Workspace requirement values of the manifest's filesystem.workspace.
const (
	WorkspaceNone     = "none"
	WorkspaceOptional = "optional"
	WorkspaceRequired = "required"
)

// Manifest is the typed sandbox manifest (sandbox.yaml). Everything not
// declared is denied; unknown keys are errors.
type Manifest struct {
	// Entry is the entry point, relative to the skill folder.
	Entry string `yaml:"entry" json:"entry,omitempty"`
	// Args are extra arguments given to the entry point before any
	// arguments derived from the input.
	Args []string `yaml:"args" json:"args,omitempty"`
	// Input configures the input schema and how input is passed.
	Input ManifestInput `yaml:"input" json:"input"`
	// Network lists what network access the skill needs.
	Network ManifestNetwork `yaml:"network" json:"network"`
	// Filesystem lists what the skill needs to write.
	Filesystem ManifestFilesystem `yaml:"filesystem" json:"filesystem"`
	// Limits are the resource limits the skill asks for.
	Limits ManifestLimits `yaml:"limits" json:"limits"`
	// Env names the environment variables the skill may receive. Values
	// come only from the operator (skill run --env).
	Env []string `yaml:"env" json:"env,omitempty"`
	// Dependencies are packages the skill imports (instead of
	// requirements.txt or package.json), resolved by `skill prepare`.
	Dependencies ManifestDependencies `yaml:"dependencies" json:"dependencies,omitempty"`
}

// ManifestInput is the manifest's input section.
type ManifestInput struct {
	// Schema is a JSON Schema file relative to the skill folder.
	Schema string `yaml:"schema" json:"schema,omitempty"`
	// Mode is InputStdin or InputArgv; empty means "stdin", or "argv" when
	// the schema is inferred from argparse.
	Mode string `yaml:"mode" json:"mode,omitempty"`
}

// ManifestNetwork is the manifest's network section.
type ManifestNetwork struct {
	// Hosts the skill connects to: "host:port", "*.domain:port" (any name
	// under domain, not domain itself) or "host" (port 443). Any entry
	// means the skill needs network; skillrun refuses to run it unless the
	// operator grants those hosts (--network allow, --allow-host).
	Hosts []string `yaml:"hosts" json:"hosts,omitempty"`
}

// ManifestFilesystem is the manifest's filesystem section.
type ManifestFilesystem struct {
	// Workspace is "none" (default), "optional" or "required": whether the
	// skill uses a host folder the operator binds writable at /workspace.
	Workspace string `yaml:"workspace" json:"workspace,omitempty"`
	// Writable lists extra absolute container paths that get a private,
	// size-limited tmpfs (besides /tmp).
	Writable []string `yaml:"writable" json:"writable,omitempty"`
}

// ManifestLimits is the manifest's limits section. Zero values mean the
// default limit.
type ManifestLimits struct {
	Memory  Bytes    `yaml:"memory" json:"memory,omitempty"`
	CPUs    float64  `yaml:"cpus" json:"cpus,omitempty"`
	Pids    int64    `yaml:"pids" json:"pids,omitempty"`
	Timeout Duration `yaml:"timeout" json:"timeout,omitempty"`
	Scratch Bytes    `yaml:"scratch" json:"scratch,omitempty"`
	Output  Bytes    `yaml:"output" json:"output,omitempty"`
}

// Bytes is a size that YAML spells as an integer or with a unit suffix
// (k, M, G, Ki, Mi, Gi, KB, MB, GB; k and K mean 1024).
type Bytes int64

// UnmarshalYAML parses a size.
func (b *Bytes) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return nodeError(n, "must be a size (e.g. 65536, 512Mi, 1G)")
	}
	v, err := ParseBytes(n.Value)
	if err != nil {
		return nodeError(n, err.Error())
	}
	*b = Bytes(v)
	return nil
}

var bytesRE = lazyre.New(`^([0-9]+)\s*([kKmMgGtT]?)(i?[bB]?)$`)

// ParseBytes parses "512Mi", "1G", "65536" into bytes. All units are
// binary (1k = 1024).
func ParseBytes(s string) (int64, error) {
	m := bytesRE().FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return 0, fmt.Errorf("invalid size %q (want e.g. 65536, 512Mi, 1G)", s)
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("invalid size %q: %w", s, err)
	}
	shift := map[string]uint{"": 0, "k": 10, "m": 20, "g": 30, "t": 40}[strings.ToLower(m[2])]
	if m[2] == "" && m[3] != "" && m[3] != "b" && m[3] != "B" {
		return 0, fmt.Errorf("invalid size %q", s)
	}
	if n > (1<<62)>>shift {
		return 0, fmt.Errorf("invalid size %q: too large", s)
	}
	return n << shift, nil
}

// Duration is a time.Duration that YAML spells as "30s", "2m".
type Duration time.Duration

// UnmarshalYAML parses a duration.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return nodeError(n, "must be a duration (e.g. 30s, 2m)")
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return nodeError(n, fmt.Sprintf("invalid duration %q (want e.g. 30s, 2m)", n.Value))
	}
	*d = Duration(v)
	return nil
}

// nodeError is a decoding error of one value: a *yaml.TypeError, so that
// the decoder goes on and reports every bad value, with its line.
func nodeError(n *yaml.Node, msg string) error {
	return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: %s", n.Line, msg)}}
}

// MarshalJSON writes the duration in milliseconds.
func (d Duration) MarshalJSON() ([]byte, error) {
	return []byte(strconv.FormatInt(time.Duration(d).Milliseconds(), 10)), nil
}

// loadManifest reads dir/sandbox.yaml strictly. A missing file is the
// zero manifest.
func loadManifest(dir string) (Manifest, string, error) {
	var m Manifest
	data, err := readSkillFile(dir, ManifestFile, MaxManifestSize)
	if errors.Is(err, os.ErrNotExist) {
		return m, "", nil
	}
	if err != nil {
		return m, "", fmt.Errorf("%s: %w", ManifestFile, err)
	}
	m, err = ParseManifest(data)
	if err != nil {
		return m, ManifestFile, err
	}
	return m, ManifestFile, nil
}

// ParseManifest decodes and checks a sandbox manifest. Unknown keys and
// invalid values are errors naming the key and the file.
func ParseManifest(data []byte) (Manifest, error) {
	var m Manifest
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&m); err != nil && !errors.Is(err, io.EOF) {
		return m, fmt.Errorf("%s: %s", ManifestFile, yamlErrorIn(data, err))
	}
	if err := m.check(); err != nil {
		return m, err
	}
	return m, nil
}

// yamlErrorIn flattens yaml.v3's multi-line type errors into one line and,
// when the document data is given, names the key of each "line N: ..."
// error ("line 3: limits.memory: invalid size ..."). Unknown-key errors
// keep yaml's wording, which names the key already.
func yamlErrorIn(data []byte, err error) string {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return oneLine(strings.TrimPrefix(err.Error(), "yaml: "))
	}
	var paths map[int]string
	if data != nil {
		var root yaml.Node
		if yaml.Unmarshal(data, &root) == nil {
			paths = map[int]string{}
			keyPaths(&root, "", paths)
		}
	}
	msgs := make([]string, len(te.Errors))
	for i, e := range te.Errors {
		var line int
		if _, err := fmt.Sscanf(e, "line %d:", &line); err == nil && paths[line] != "" {
			prefix := fmt.Sprintf("line %d: ", line)
			if rest := strings.TrimPrefix(e, prefix); !strings.HasPrefix(rest, "field ") {
				e = prefix + paths[line] + ": " + rest
			} else if m := unknownFieldRE().FindStringSubmatch(rest); m != nil {
				e = prefix + unknownKey(paths[line], m[1], m[2])
			}
		}
		msgs[i] = oneLine(e)
	}
	return strings.Join(msgs, "; ")
}

// unknownFieldRE is yaml.v3's unknown-key error: the key and the Go type.
var unknownFieldRE = lazyre.New(`^field (\S+) not found in type spec\.(\w+)$`)

// manifestSections are the manifest's mappings by Go type, for errors.
var manifestSections = map[string]reflect.Type{
	"Manifest":             reflect.TypeFor[Manifest](),
	"ManifestInput":        reflect.TypeFor[ManifestInput](),
	"ManifestNetwork":      reflect.TypeFor[ManifestNetwork](),
	"ManifestFilesystem":   reflect.TypeFor[ManifestFilesystem](),
	"ManifestLimits":       reflect.TypeFor[ManifestLimits](),
	"ManifestDependencies": reflect.TypeFor[ManifestDependencies](),
}

// unknownKey explains an unknown key at path (limits.memroy) of a
// section whose Go type is typ: the valid keys and the nearest one.
func unknownKey(path, key, typ string) string {
	if path == "" {
		path = key
	}
	t, ok := manifestSections[typ]
	if !ok {
		return path + ": unknown key"
	}
	var keys []string
	for i := 0; i < t.NumField(); i++ {
		if k, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ","); k != "" && k != "-" {
			keys = append(keys, k)
		}
	}
	where := "the top-level keys"
	if i := strings.LastIndex(path, "."); i >= 0 {
		where = "the keys of " + path[:i]
	}
	msg := fmt.Sprintf("%s: unknown key; %s are %s", path, where, strings.Join(keys, ", "))
	best, bestD := "", 3
	for _, k := range keys {
		if d := editDistance(strings.ToLower(key), k); d < bestD {
			best, bestD = k, d
		}
	}
	if best != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", best)
	}
	return msg
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// keyPaths records, for each line of a YAML document, the dotted path of
// the key on it or whose value starts on it: the outermost one for flow
// style ("a: {b: 1}" is a), the innermost for block style.
func keyPaths(n *yaml.Node, prefix string, out map[int]string) {
	switch n.Kind {
	case yaml.DocumentNode, yaml.SequenceNode:
		for _, c := range n.Content {
			keyPaths(c, prefix, out)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := keyName(k.Value)
			if prefix != "" {
				p = prefix + "." + p
			}
			lines := []int{k.Line}
			if v.Kind == yaml.ScalarNode || v.Kind == yaml.AliasNode || v.Style&yaml.FlowStyle != 0 {
				lines = append(lines, v.Line)
			}
			for _, l := range lines {
				if _, ok := out[l]; !ok {
					out[l] = p
				}
			}
			keyPaths(v, p, out)
		}
	}
}

var (
	envNameRE = lazyre.New(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// ReservedEnv are variables the sandbox always sets; a manifest may not
// declare them and the operator may not override them.
var reservedEnv = map[string]bool{"PATH": true, "HOME": true, "TMPDIR": true, "SKILL_DIR": true, "WORKSPACE": true}

// check validates manifest values, returning every problem.
func (m *Manifest) check() error {
	var errs []error
	fail := func(field, format string, a ...any) {
		errs = append(errs, fmt.Errorf("%s: %s: %s", ManifestFile, field, fmt.Sprintf(format, a...)))
	}
	if m.Entry != "" {
		if err := checkRelPath(m.Entry); err != nil {
			fail("entry", "%v", err)
		}
	}
	if m.Input.Schema != "" {
		if err := checkRelPath(m.Input.Schema); err != nil {
			fail("input.schema", "%v", err)
		}
	}
	switch m.Input.Mode {
	case "", InputStdin, InputArgv:
	default:
		fail("input.mode", "%q is not one of stdin, argv", m.Input.Mode)
	}
	for _, h := range m.Network.Hosts {
		if _, err := policy.ParseRule(h); err != nil {
			fail("network.hosts", "%v", err)
		}
	}
	switch m.Filesystem.Workspace {
	case "", WorkspaceNone, WorkspaceOptional, WorkspaceRequired:
	default:
		fail("filesystem.workspace", "%q is not one of none, optional, required", m.Filesystem.Workspace)
	}
	for _, p := range m.Filesystem.Writable {
		if err := CheckWritablePath(p); err != nil {
			fail("filesystem.writable", "%v", err)
		}
	}
	l := m.Limits
	if l.Memory != 0 && l.Memory < MinMemory {
		fail("limits.memory", "%d bytes is below the minimum %d", l.Memory, MinMemory)
	}
	if l.CPUs < 0 || l.CPUs > 1024 {
		fail("limits.cpus", "%g is out of range (0-1024)", l.CPUs)
	}
	if l.Pids < 0 || l.Pids == 1 {
		fail("limits.pids", "%d is out of range (at least 2)", l.Pids)
	}
	if l.Timeout < 0 {
		fail("limits.timeout", "must be positive")
	}
	if l.Scratch != 0 && l.Scratch < 1<<20 {
		fail("limits.scratch", "%d bytes is below the minimum 1Mi", l.Scratch)
	}
	if l.Output < 0 {
		fail("limits.output", "must be positive")
	}
	for _, e := range m.Env {
		switch {
		case !envNameRE().MatchString(e):
			fail("env", "%q is not a valid variable name", e)
		case reservedEnv[e]:
			fail("env", "%q is set by the sandbox and cannot be declared", e)
		}
	}
	return errors.Join(errs...)
}

// checkRelPath accepts a clean relative path that stays in the folder.
func checkRelPath(p string) error {
	if path.IsAbs(p) || filepath.IsAbs(p) {
		return fmt.Errorf("%q must be relative to the skill folder", p)
	}
	c := path.Clean(p)
	if c == "." || c == ".." || strings.HasPrefix(c, "../") {
		return fmt.Errorf("%q leaves the skill folder", p)
	}
	return nil
}

// CheckWritablePath accepts an absolute container path that may get its
// own tmpfs: not the root, not a system or sandbox path.
func CheckWritablePath(p string) error {
	if !path.IsAbs(p) || path.Clean(p) != p {
		return fmt.Errorf("%q must be a clean absolute path", p)
	}
	for _, bad := range []string{"/", "/proc", "/dev", "/sys", "/etc", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", SkillMount, WorkspaceMount, "/tmp"} {
		if p == bad || bad != "/" && strings.HasPrefix(p, bad+"/") {
			if bad == "/tmp" {
				return fmt.Errorf("%q is inside /tmp, which is always writable scratch", p)
			}
			return fmt.Errorf("%q is inside %s, which cannot be made writable", p, bad)
		}
	}
	return nil
}
