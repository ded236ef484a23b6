package skillenv

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"

	"github.com/skillrun/skillrun/internal/safefs"
	"github.com/skillrun/skillrun/spec"
)

// keyVersion changes when the environment layout or the build changes.
const keyVersion = 1

// sandboxPath is the sandbox's PATH, whose folders are the host's (the
// sandbox binds /usr and the top-level links): the interpreter a skill
// runs is found the same way on the host.
var sandboxPath = []string{"/usr/local/bin", "/usr/bin", "/bin"}

// Interpreter identifies an interpreter binary: a new build of it (its
// size or modification time changes) gives a new key.
type Interpreter struct {
	// Path is the resolved, symlink-free path.
	Path  string `json:"path"`
	Size  int64  `json:"size"`
	MTime int64  `json:"mtime_ns"`
}

// lookInterpreter resolves name (a bare name looked up on the sandbox's
// PATH, or an absolute path) to a regular executable.
func lookInterpreter(name string) (Interpreter, error) {
	cands := []string{name}
	if !filepath.IsAbs(name) {
		cands = cands[:0]
		for _, d := range sandboxPath {
			cands = append(cands, filepath.Join(d, name))
		}
	}
	for _, c := range cands {
		real, err := filepath.EvalSymlinks(c)
		if err != nil {
			continue
		}
		fi, err := os.Stat(real)
		if err != nil || !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0 {
			continue
		}
		return Interpreter{Path: real, Size: fi.Size(), MTime: fi.ModTime().UnixNano()}, nil
	}
	return Interpreter{}, fmt.Errorf("interpreter %q not found on %s", name, strings.Join(sandboxPath, ":"))
}

// Policy is the install policy that is part of an environment's key.
type Policy struct {
	// SourceBuilds lets pip build source distributions (runs their
	// setup code, in the build sandbox); default: binary wheels only.
	SourceBuilds bool
	// InstallScripts lets npm run packages' install scripts (in the build
	// sandbox); default: --ignore-scripts.
	InstallScripts bool
}

// Plan is what one environment holds: computed from a skill without
// building anything.
type Plan struct {
	// Key is the content address (hex sha256).
	Key    string
	Python *PythonPlan
	Node   *NodePlan
	Policy Policy
}

// PlanFor computes the plan (and key) of skill sk's environment, or nil
// when it declares no dependencies. Cheap: it stats the interpreters and
// hashes the declarations, reads no environment.
func PlanFor(sk *spec.Skill, pol Policy) (*Plan, error) {
	if sk.Deps.Empty() {
		return nil, nil
	}
	p := &Plan{Policy: pol}
	type keyDoc struct {
		Version  int               `json:"v"`
		Platform string            `json:"platform"`
		Python   any               `json:"python,omitempty"`
		Node     any               `json:"node,omitempty"`
		Policy   map[string]bool   `json:"policy"`
		Local    map[string]string `json:"local,omitempty"`
	}
	doc := keyDoc{Version: keyVersion, Platform: goruntime.GOOS + "/" + goruntime.GOARCH, Policy: map[string]bool{}}
	if d := sk.Deps.Python; d != nil {
		py, err := planPython(sk, d)
		if err != nil {
			return nil, fmt.Errorf("python: %w", err)
		}
		p.Python = py
		doc.Python = py.keyDoc()
		doc.Policy["source_builds"] = pol.SourceBuilds
	}
	if d := sk.Deps.Node; d != nil {
		nd, err := planNode(sk, d)
		if err != nil {
			return nil, fmt.Errorf("node: %w", err)
		}
		p.Node = nd
		doc.Node = nd.keyDoc()
		doc.Local = nd.LocalDigests
		doc.Policy["install_scripts"] = pol.InstallScripts
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(b)
	p.Key = hex.EncodeToString(sum[:])
	return p, nil
}

// treeSum hashes a file, or a folder as Digest does (paths, modes,
// contents, symlinks never followed).
func treeSum(root string) (string, error) {
	fi, err := os.Lstat(root)
	if err != nil {
		return "", err
	}
	switch {
	case fi.Mode().IsRegular():
		f, err := safefs.OpenBeneath(filepath.Dir(root), filepath.Base(root))
		if err != nil {
			return "", err
		}
		defer f.Close()
		h := sha256.New()
		if _, err := io.Copy(h, f); err != nil {
			return "", err
		}
		return hex.EncodeToString(h.Sum(nil)), nil
	case fi.IsDir():
		d, _, _, err := Digest(root)
		return d, err
	}
	return "", errors.New("not a file or folder")
}
