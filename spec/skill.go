package spec

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
	"go.yaml.in/yaml/v3"
)

// SkillFile is the name of the file that makes a folder a skill.
const SkillFile = "SKILL.md"

// Field limits from the Agent Skills specification.
const (
	MaxNameLen          = 64
	MaxDescriptionLen   = 1024
	MaxCompatibilityLen = 500
)

// Skill is a parsed and validated skill folder.
type Skill struct {
	// Dir is the absolute, symlink-free path of the skill folder.
	Dir string `json:"dir"`
	// Name is the skill's name; it equals the folder's base name.
	Name string `json:"name"`
	// Description says what the skill does and when to use it.
	Description string `json:"description"`
	// License is the skill's license (free text), if any.
	License string `json:"license,omitempty"`
	// Compatibility states environment requirements, if any.
	Compatibility string `json:"compatibility,omitempty"`
	// Metadata is the free string map of the front matter.
	Metadata map[string]string `json:"metadata,omitempty"`
	// AllowedTools is the space-separated allowed-tools field, split.
	AllowedTools []string `json:"allowed_tools,omitempty"`
	// Body is the Markdown after the front matter.
	Body string `json:"-"`
	// Manifest is the sandbox manifest (zero when the skill ships none).
	Manifest Manifest `json:"manifest"`
	// ManifestFile is the manifest's file name relative to Dir, or "".
	ManifestFile string `json:"manifest_file,omitempty"`
	// Entry is how the skill is started.
	Entry Entry `json:"entry"`
	// Input describes the skill's input.
	Input Input `json:"input"`
	// Deps are the packages the skill declares it imports.
	Deps Dependencies `json:"dependencies,omitempty"`
	// Warnings are what Load accepted but a strict check refuses:
	// deviations from the Agent Skills specification that do not touch
	// the sandbox (a description over 1024 characters, a name other than
	// its folder's), and an entry point the convention could not pick.
	// `skill validate --strict` makes them errors.
	Warnings []string `json:"warnings,omitempty"`

	// compiled is the declared input schema, compiled once by Load.
	compiled *jsonschema.Resolved
}

// frontMatter is SKILL.md's YAML header. Unknown keys are tolerated (the
// Agent Skills specification lets clients add their own), but the known
// ones are typed.
type frontMatter struct {
	Name          *string   `yaml:"name"`
	Description   *string   `yaml:"description"`
	License       string    `yaml:"license"`
	Compatibility string    `yaml:"compatibility"`
	Metadata      yaml.Node `yaml:"metadata"`
	AllowedTools  yaml.Node `yaml:"allowed-tools"`
}

// Load reads the skill in dir: SKILL.md, the sandbox manifest, the entry
// point and the input schema. Every problem found is returned, joined with
// errors.Join, each naming its file and field ("SKILL.md: name: ...").
func Load(dir string) (*Skill, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("skill folder %q: %w", dir, err)
	}
	if abs, err = filepath.EvalSymlinks(abs); err != nil {
		return nil, fmt.Errorf("skill folder %q: %w", dir, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("skill folder %q: %w", dir, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("skill folder %q: not a directory", dir)
	}
	data, err := readSkillFile(abs, SkillFile, MaxSkillMDSize)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("skill folder %q: no %s", dir, SkillFile)
		}
		return nil, fmt.Errorf("%s: %w", SkillFile, err)
	}
	s := &Skill{Dir: abs}
	var errs []error
	errs = append(errs, s.parseSkillMD(data, filepath.Base(abs))...)
	m, mfile, err := loadManifest(abs)
	if err != nil {
		errs = append(errs, err)
	} else {
		s.Manifest, s.ManifestFile = m, mfile
		if err := s.resolveEntry(); err != nil {
			errs = append(errs, err)
		} else if err := s.resolveInput(); err != nil {
			errs = append(errs, err)
		}
		if err := s.resolveDeps(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return s, nil
}

// parseSkillMD fills the front matter fields and the body, returning every
// problem found.
func (s *Skill) parseSkillMD(data []byte, folder string) []error {
	fail := func(field, format string, a ...any) error {
		if field == "" {
			return fmt.Errorf("%s: %s", SkillFile, fmt.Sprintf(format, a...))
		}
		return fmt.Errorf("%s: %s: %s", SkillFile, field, fmt.Sprintf(format, a...))
	}
	data = bytes.TrimPrefix(data, []byte("\ufeff"))
	text := strings.ReplaceAll(string(data), "\r\n", "\n")
	if !strings.HasPrefix(text, "---\n") {
		return []error{fail("", "missing YAML front matter (the file must start with a line \"---\")")}
	}
	rest := text[len("---\n"):]
	var header string
	switch i := strings.Index(rest, "\n---\n"); {
	case strings.HasPrefix(rest, "---\n"):
		header, s.Body = "", rest[len("---\n"):]
	case i >= 0:
		header, s.Body = rest[:i+1], rest[i+len("\n---\n"):]
	case strings.HasSuffix(rest, "\n---"):
		header, s.Body = rest[:len(rest)-len("---")], ""
	default:
		return []error{fail("", "front matter is not closed by a line \"---\"")}
	}
	var fm frontMatter
	// The leading newline stands for the opening "---" so that YAML line
	// numbers are SKILL.md line numbers.
	if err := yaml.Unmarshal([]byte("\n"+header), &fm); err != nil {
		return []error{fail("", "front matter: %s", yamlErrorIn([]byte("\n"+header), err))}
	}
	var errs []error
	switch {
	case fm.Name == nil:
		errs = append(errs, fail("name", "required"))
	default:
		s.Name = *fm.Name
		if err := checkName(s.Name); err != nil {
			errs = append(errs, fail("name", "%v", err))
		} else if s.Name != folder {
			s.warn("name", "%q does not match the folder name %q (Agent Skills specification)", s.Name, folder)
		}
	}
	switch {
	case fm.Description == nil || strings.TrimSpace(*fm.Description) == "":
		errs = append(errs, fail("description", "required, 1-%d characters", MaxDescriptionLen))
	default:
		s.Description = *fm.Description
		if n := utf8.RuneCountInString(s.Description); n > MaxDescriptionLen {
			s.warn("description", "%d characters, at most %d allowed (Agent Skills specification)", n, MaxDescriptionLen)
		}
	}
	s.License = fm.License
	s.Compatibility = fm.Compatibility
	if n := utf8.RuneCountInString(s.Compatibility); n > MaxCompatibilityLen {
		s.warn("compatibility", "%d characters, at most %d allowed (Agent Skills specification)", n, MaxCompatibilityLen)
	}
	if fm.Metadata.Kind != 0 {
		md, err := stringMap(&fm.Metadata)
		if err != nil {
			errs = append(errs, fail("metadata", "%v", err))
		}
		s.Metadata = md
	}
	switch fm.AllowedTools.Kind {
	case 0:
	case yaml.ScalarNode:
		s.AllowedTools = strings.Fields(fm.AllowedTools.Value)
	case yaml.SequenceNode:
		// Some clients write a list; accept it when every item is a string.
		for _, n := range fm.AllowedTools.Content {
			if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
				errs = append(errs, fail("allowed-tools", "line %d: list items must be strings", n.Line))
				continue
			}
			s.AllowedTools = append(s.AllowedTools, n.Value)
		}
	default:
		errs = append(errs, fail("allowed-tools", "must be a space-separated string"))
	}
	return errs
}

// warn records a deviation of SKILL.md's field that does not touch the
// sandbox (see Skill.Warnings).
func (s *Skill) warn(field, format string, a ...any) {
	s.Warnings = append(s.Warnings, fmt.Sprintf("%s: %s: %s", SkillFile, field, fmt.Sprintf(format, a...)))
}

// checkName applies the Agent Skills naming rules that the sandbox relies
// on (the name is part of container IDs and tool names).
func checkName(name string) error {
	var problems []string
	switch n := len(name); {
	case n == 0:
		return errors.New("must not be empty")
	case n > MaxNameLen:
		problems = append(problems, fmt.Sprintf("%d characters, at most %d allowed", n, MaxNameLen))
	}
	for i, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
			problems = append(problems, fmt.Sprintf("character %q at offset %d is not allowed (use a-z, 0-9 and -)", r, i))
			break
		}
	}
	if strings.HasPrefix(name, "-") || strings.HasSuffix(name, "-") {
		problems = append(problems, "must not start or end with a hyphen")
	}
	if strings.Contains(name, "--") {
		problems = append(problems, "must not contain consecutive hyphens")
	}
	if len(problems) > 0 {
		return fmt.Errorf("%q: %s", name, strings.Join(problems, "; "))
	}
	return nil
}

// keyName prints a YAML key as it is when it is plain, quoted otherwise,
// so that an error message stays on one line.
func keyName(k string) string {
	for _, r := range k {
		if r < 0x20 || r == 0x7f || r == '"' || r == '\\' || !unicode.IsPrint(r) {
			return strconv.Quote(k)
		}
	}
	return k
}

// stringMap decodes a YAML mapping whose keys and values are strings.
func stringMap(n *yaml.Node) (map[string]string, error) {
	if n.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("line %d: must be a mapping of strings to strings", n.Line)
	}
	m := make(map[string]string, len(n.Content)/2)
	var problems []string
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
			problems = append(problems, fmt.Sprintf("%s: line %d: value must be a string", keyName(k.Value), v.Line))
			continue
		}
		m[k.Value] = v.Value
	}
	if len(problems) > 0 {
		return m, errors.New(strings.Join(problems, "; "))
	}
	return m, nil
}
