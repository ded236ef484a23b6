package spec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path"
	"sort"
	"strings"

	"github.com/skillrun/skillrun/internal/lazyre"
)

// Dependency files a skill folder may ship next to SKILL.md.
const (
	// RequirementsFile lists Python requirements (pip's format, restricted:
	// see ParseRequirements).
	RequirementsFile = "requirements.txt"
	// RequirementsLockFile, when shipped, pins every Python distribution
	// with its sha256 ("name==version --hash=sha256:HEX"): the build
	// installs exactly it (pip --require-hashes --no-deps).
	RequirementsLockFile = "requirements.lock"
	// PackageJSONFile declares Node dependencies.
	PackageJSONFile = "package.json"
	// PackageLockFile is npm's lock file; with it the build runs npm ci.
	PackageLockFile = "package-lock.json"
	// MaxDepsFileSize bounds each dependency file Load reads.
	MaxDepsFileSize = 4 << 20
)

// Paths of a dependency environment inside the sandbox.
const (
	// EnvMount is where a skill's prepared environment is mounted,
	// read-only.
	EnvMount = "/opt/skill-env"
	// NodeModulesMount is where the environment's node_modules is
	// mounted, read-only: Node's resolver walks up from /skill/... to
	// /node_modules for require and import alike (NODE_PATH covers only
	// require).
	NodeModulesMount = "/node_modules"
)

// ManifestDependencies is the manifest's dependencies section: packages
// the skill imports, resolved into a per-skill environment by `skill
// prepare`. Files in the skill folder (requirements.txt, package.json)
// may declare them instead; one ecosystem is declared in one place.
type ManifestDependencies struct {
	// Python are requirement specifiers ("requests==2.31.0",
	// "pypdf>=4,<5").
	Python []string `yaml:"python" json:"python,omitempty"`
	// Node are npm package specs ("left-pad@1.3.0", "is-number@^7").
	Node []string `yaml:"node" json:"node,omitempty"`
}

// Dependencies is what a skill declares it imports, read by Load.
type Dependencies struct {
	// Python is nil when the skill declares no Python packages.
	Python *PythonDeps `json:"python,omitempty"`
	// Node is nil when the skill declares no Node packages.
	Node *NodeDeps `json:"node,omitempty"`
}

// Empty reports whether no dependency is declared.
func (d Dependencies) Empty() bool { return d.Python == nil && d.Node == nil }

// PythonDeps are a skill's Python requirements.
type PythonDeps struct {
	// Source is where they were declared: "requirements.txt" or
	// "sandbox.yaml".
	Source string `json:"source"`
	// Requirements are the normalized requirement lines, in order.
	Requirements []string `json:"requirements"`
	// Lock is the shipped requirements.lock (normalized lines), if any.
	Lock []string `json:"lock,omitempty"`
}

// NodeDeps are a skill's Node dependencies.
type NodeDeps struct {
	// Source is "package.json" or "sandbox.yaml".
	Source string `json:"source"`
	// Dependencies maps package names to npm specs.
	Dependencies map[string]string `json:"dependencies"`
	// Lock is the shipped package-lock.json, verbatim, if any.
	Lock json.RawMessage `json:"-"`
	// LocalFiles are the skill-relative files that "file:" specs name
	// (tarballs or folders inside the skill folder).
	LocalFiles []string `json:"local_files,omitempty"`
}

// PackageJSON is the package.json the build installs from: the
// dependencies only (scripts, bin and other fields of the skill's own
// package.json never reach npm).
func (n *NodeDeps) PackageJSON() []byte {
	doc := map[string]any{"name": "skillrun-env", "version": "0.0.0", "private": true, "dependencies": n.Dependencies}
	b, _ := json.MarshalIndent(doc, "", "  ")
	return append(b, '\n')
}

// Requirement lines: a PEP 508 name with optional extras and version
// specifiers, an optional environment marker, and optional --hash
// options. No URLs, paths, editable installs or pip options: those would
// reach hosts and files the operator did not configure.
var (
	reqNameRE = lazyre.New(`^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?(\[[A-Za-z0-9._,\s-]*\])?`)
	reqSpecRE = lazyre.New(`^\s*((~=|==|!=|<=|>=|<|>|===)\s*[A-Za-z0-9.*+!_-]+)(\s*,\s*(~=|==|!=|<=|>=|<|>|===)\s*[A-Za-z0-9.*+!_-]+)*\s*$`)
	reqHashRE = lazyre.New(`^--hash=sha(256|384|512):[0-9a-f]+$`)
	// npm package names (scoped or not) and specs that stay on the
	// configured registry (versions, ranges, tags) or in the skill folder
	// (file:).
	npmNameRE = lazyre.New(`^(@[a-z0-9][a-z0-9._~-]*/)?[a-z0-9][a-z0-9._~-]*$`)
	npmSpecRE = lazyre.New(`^[A-Za-z0-9 .*^~<>=|x+-]*$`)
)

// ParseRequirements checks pip requirement lines (requirements.txt's
// content, or the manifest's list) and returns them normalized: comments
// and blank lines dropped, white space folded. Each problem names its
// line.
func ParseRequirements(source string, lines []string, numbered bool) ([]string, error) {
	var out []string
	var errs []error
	for i, raw := range lines {
		where := source
		if numbered {
			where = fmt.Sprintf("%s: line %d", source, i+1)
		}
		line := raw
		if j := strings.Index(line, " #"); j >= 0 {
			line = line[:j]
		}
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		line = strings.Join(strings.Fields(line), " ")
		if line == "" {
			continue
		}
		if err := checkRequirement(line); err != nil {
			errs = append(errs, fmt.Errorf("%s: %q: %v", where, line, err))
			continue
		}
		out = append(out, line)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

func checkRequirement(line string) error {
	if strings.HasPrefix(line, "-") {
		return errors.New("pip options are not allowed (the operator configures the index; use a requirement such as name==1.2)")
	}
	if strings.HasSuffix(line, "\\") {
		return errors.New("line continuations are not supported")
	}
	var hashes []string
	fields := strings.Fields(line)
	for len(fields) > 0 && strings.HasPrefix(fields[len(fields)-1], "--") {
		hashes = append(hashes, fields[len(fields)-1])
		fields = fields[:len(fields)-1]
	}
	for _, h := range hashes {
		if !reqHashRE().MatchString(h) {
			return fmt.Errorf("option %q is not allowed (only --hash=sha256:...)", h)
		}
	}
	req := strings.Join(fields, " ")
	if strings.Contains(req, "://") || strings.Contains(req, " @ ") || strings.HasPrefix(req, ".") || strings.HasPrefix(req, "/") {
		return errors.New("URLs and paths are not allowed (packages come from the operator's index)")
	}
	spec, _, _ := strings.Cut(req, ";") // environment markers are pip's to evaluate
	name := reqNameRE().FindString(spec)
	if name == "" {
		return errors.New("not a requirement (want e.g. requests==2.31.0)")
	}
	if rest := spec[len(name):]; strings.TrimSpace(rest) != "" && !reqSpecRE().MatchString(rest) {
		return fmt.Errorf("bad version specifier %q", strings.TrimSpace(rest))
	}
	return nil
}

// parseNodeDeps checks npm dependency specs (name -> spec); file: specs
// (relative to base, the package.json's folder in the skill) must stay in
// the skill folder dir.
func parseNodeDeps(source string, deps map[string]string, dir, base string) (*NodeDeps, error) {
	n := &NodeDeps{Source: source, Dependencies: map[string]string{}}
	names := make([]string, 0, len(deps))
	for k := range deps {
		names = append(names, k)
	}
	sort.Strings(names)
	var errs []error
	for _, name := range names {
		v := strings.TrimSpace(deps[name])
		switch {
		case !npmNameRE().MatchString(name):
			errs = append(errs, fmt.Errorf("%s: dependencies: %q is not an npm package name", source, name))
		case strings.HasPrefix(v, "file:"):
			rel := path.Join(base, strings.TrimPrefix(strings.TrimPrefix(v, "file:"), "./"))
			if err := checkRelPath(rel); err != nil {
				errs = append(errs, fmt.Errorf("%s: dependencies: %s: %v", source, name, err))
				continue
			}
			rel = path.Clean(rel)
			if fi, err := os.Stat(dir + "/" + rel); err != nil || !(fi.Mode().IsRegular() || fi.IsDir()) {
				errs = append(errs, fmt.Errorf("%s: dependencies: %s: %q is not a file or folder of the skill", source, name, rel))
				continue
			}
			n.LocalFiles = append(n.LocalFiles, rel)
			v = "file:" + rel
		case v == "" || !npmSpecRE().MatchString(v):
			errs = append(errs, fmt.Errorf("%s: dependencies: %s: spec %q is not allowed (versions, ranges and tags from the operator's registry, or file: inside the skill; no URLs, git or aliases)", source, name, v))
			continue
		}
		n.Dependencies[name] = v
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return n, nil
}

// DepsDirs are the folders of a skill where its dependency files are
// looked for, in order: its top, and scripts/ (where many published
// skills keep requirements.txt or package.json next to the scripts that
// import them).
var DepsDirs = []string{"", "scripts"}

// readDepsFile reads the dependency file name from the first of DepsDirs
// that has it and returns its skill-relative path; a file in more than one
// is an error (declare in one place).
func readDepsFile(dir, name string) ([]byte, string, error) {
	var data []byte
	var found string
	for _, d := range DepsDirs {
		rel := path.Join(d, name)
		b, err := readSkillFile(dir, rel, MaxDepsFileSize)
		switch {
		case errors.Is(err, os.ErrNotExist):
			continue
		case err != nil:
			return nil, rel, fmt.Errorf("%s: %w", rel, err)
		case found != "":
			return nil, rel, fmt.Errorf("%s: %s declares the same packages' file too: keep one", rel, found)
		}
		data, found = b, rel
	}
	if found == "" {
		return nil, "", os.ErrNotExist
	}
	return data, found, nil
}

// resolveDeps reads the dependency declarations of the skill in s.Dir.
func (s *Skill) resolveDeps() error {
	if s.Dir == "" {
		return nil
	}
	var errs []error
	md := s.Manifest.Dependencies
	// Python.
	req, reqFile, reqErr := readDepsFile(s.Dir, RequirementsFile)
	switch {
	case reqErr == nil && len(md.Python) > 0:
		errs = append(errs, fmt.Errorf("%s: dependencies.python: %s declares Python packages too: declare them in one place", ManifestFile, reqFile))
	case reqErr == nil:
		lines, err := ParseRequirements(reqFile, strings.Split(string(req), "\n"), true)
		if err != nil {
			errs = append(errs, err)
		} else if len(lines) > 0 {
			s.Deps.Python = &PythonDeps{Source: reqFile, Requirements: lines}
		}
	case !errors.Is(reqErr, os.ErrNotExist):
		errs = append(errs, reqErr)
	case len(md.Python) > 0:
		lines, err := ParseRequirements(ManifestFile+": dependencies.python", md.Python, false)
		if err != nil {
			errs = append(errs, err)
		} else {
			s.Deps.Python = &PythonDeps{Source: ManifestFile, Requirements: lines}
		}
	}
	lockFile := RequirementsLockFile
	if reqFile != "" {
		lockFile = path.Join(path.Dir(reqFile), RequirementsLockFile)
	}
	if lock, err := readSkillFile(s.Dir, lockFile, MaxDepsFileSize); err == nil {
		if s.Deps.Python == nil {
			errs = append(errs, fmt.Errorf("%s: there are no Python requirements to lock", lockFile))
		} else if lines, err := ParseRequirements(lockFile, strings.Split(string(lock), "\n"), true); err != nil {
			errs = append(errs, err)
		} else {
			for i, l := range lines {
				if !strings.Contains(l, "==") || !strings.Contains(l, "--hash=") {
					errs = append(errs, fmt.Errorf("%s: %q: every line must pin name==version with --hash=sha256:...", lockFile, lines[i]))
				}
			}
			s.Deps.Python.Lock = lines
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, fmt.Errorf("%s: %w", lockFile, err))
	}
	// Node.
	pj, pjFile, pjErr := readDepsFile(s.Dir, PackageJSONFile)
	var nodeDeps map[string]string
	source := ""
	switch {
	case pjErr == nil:
		var doc struct {
			Dependencies         map[string]string `json:"dependencies"`
			OptionalDependencies map[string]string `json:"optionalDependencies"`
		}
		if err := json.Unmarshal(pj, &doc); err != nil {
			errs = append(errs, fmt.Errorf("%s: %v", pjFile, err))
			break
		}
		if len(doc.OptionalDependencies) > 0 {
			errs = append(errs, fmt.Errorf("%s: optionalDependencies: not supported: list them under dependencies", pjFile))
		}
		if len(doc.Dependencies) > 0 && len(md.Node) > 0 {
			errs = append(errs, fmt.Errorf("%s: dependencies.node: %s declares Node packages too: declare them in one place", ManifestFile, pjFile))
			break
		}
		nodeDeps, source = doc.Dependencies, pjFile
	case !errors.Is(pjErr, os.ErrNotExist):
		errs = append(errs, pjErr)
	}
	if len(nodeDeps) == 0 && len(md.Node) > 0 {
		nodeDeps, source = map[string]string{}, ManifestFile
		for _, d := range md.Node {
			name, ver := splitNpmSpec(d)
			if _, dup := nodeDeps[name]; dup {
				errs = append(errs, fmt.Errorf("%s: dependencies.node: %q is listed twice", ManifestFile, name))
			}
			nodeDeps[name] = ver
		}
		source = ManifestFile + ": dependencies.node"
	}
	if len(nodeDeps) > 0 {
		base := ""
		if pjFile != "" && source == pjFile {
			base = path.Dir(pjFile)
		}
		n, err := parseNodeDeps(source, nodeDeps, s.Dir, base)
		if err != nil {
			errs = append(errs, err)
		} else {
			n.Source = strings.TrimSuffix(source, ": dependencies.node")
			s.Deps.Node = n
		}
	}
	if s.Deps.Node == nil {
		// Skill loading is on every run's path: no lock is read for a
		// skill without Node dependencies.
		return errors.Join(errs...)
	}
	npmLock := PackageLockFile
	if pjFile != "" && s.Deps.Node.Source == pjFile {
		npmLock = path.Join(path.Dir(pjFile), PackageLockFile)
	}
	if lock, err := readSkillFile(s.Dir, npmLock, MaxDepsFileSize); err == nil {
		if !json.Valid(lock) {
			errs = append(errs, fmt.Errorf("%s: not valid JSON", npmLock))
		} else {
			var c bytes.Buffer
			_ = json.Compact(&c, lock)
			s.Deps.Node.Lock = c.Bytes()
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, fmt.Errorf("%s: %w", npmLock, err))
	}
	return errors.Join(errs...)
}

// splitNpmSpec splits "name@spec" ("@scope/name@spec"); a bare name means
// "latest".
func splitNpmSpec(s string) (string, string) {
	s = strings.TrimSpace(s)
	at := strings.LastIndex(s, "@")
	if at <= 0 {
		return s, "latest"
	}
	return s[:at], s[at+1:]
}

// WithPackages adds the operator's packages (--with, like uv run --with)
// to the skill's dependencies: a pip requirement ("tabulate==0.9.0"), or
// "npm:NAME@VERSION" for Node. They join the skill's own declarations (and
// so the environment's key). A URL, a path or a pip option is refused, the
// error naming the flag.
func (s *Skill) WithPackages(pkgs []string) error {
	var py []string
	node := map[string]string{}
	var errs []error
	for _, p := range pkgs {
		p = strings.TrimSpace(p)
		if rest, ok := strings.CutPrefix(p, "npm:"); ok {
			name, ver := splitNpmSpec(rest)
			if _, err := parseNodeDeps("--with", map[string]string{name: ver}, s.Dir, ""); err != nil || strings.HasPrefix(ver, "file:") {
				errs = append(errs, fmt.Errorf("--with %q: want npm:NAME@VERSION (a package of the operator's registry)", p))
				continue
			}
			node[name] = ver
			continue
		}
		lines, err := ParseRequirements("--with", []string{p}, false)
		if err != nil || len(lines) != 1 {
			errs = append(errs, fmt.Errorf("--with %q: want a pip requirement such as name==1.2 (no URLs, paths or pip options), or npm:NAME@VERSION", p))
			continue
		}
		py = append(py, lines[0])
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if len(py) > 0 {
		if s.Deps.Python == nil {
			s.Deps.Python = &PythonDeps{Source: "--with"}
		} else if len(s.Deps.Python.Lock) > 0 {
			return fmt.Errorf("--with: the skill pins its Python packages (%s); add the package there instead", RequirementsLockFile)
		}
		d := *s.Deps.Python
		d.Requirements = append(append([]string(nil), d.Requirements...), py...)
		s.Deps.Python = &d
	}
	if len(node) > 0 {
		d := &NodeDeps{Source: "--with", Dependencies: map[string]string{}}
		if s.Deps.Node != nil {
			if len(s.Deps.Node.Lock) > 0 {
				return fmt.Errorf("--with: the skill pins its Node packages (%s); add the package there instead", PackageLockFile)
			}
			c := *s.Deps.Node
			d = &c
			d.Dependencies = maps.Clone(s.Deps.Node.Dependencies)
		}
		for k, v := range node {
			d.Dependencies[k] = v
		}
		s.Deps.Node = d
	}
	return nil
}
