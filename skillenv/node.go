package skillenv

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/skillrun/skillrun/internal/safefs"
	"github.com/skillrun/skillrun/spec"
)

// NodePlan is the Node half of a plan.
type NodePlan struct {
	Deps        *spec.NodeDeps
	Interpreter Interpreter
	// LocalDigests are the sha256 of the file: dependencies' contents.
	LocalDigests map[string]string
	// Dir is the skill folder the file: dependencies are in.
	Dir string
}

// planNode is the Node half of sk's plan: the interpreter the skill runs
// (node, or its Node entry's) and the digests of its file: dependencies.
func planNode(sk *spec.Skill, d *spec.NodeDeps) (*NodePlan, error) {
	name := "node"
	if sk.Entry.Kind == spec.KindNode && len(sk.Entry.Interpreter) > 0 {
		name = sk.Entry.Interpreter[0]
	}
	in, err := lookInterpreter(name)
	if err != nil {
		return nil, err
	}
	np := &NodePlan{Deps: d, Interpreter: in, Dir: sk.Dir, LocalDigests: map[string]string{}}
	for _, rel := range d.LocalFiles {
		sum, err := treeSum(filepath.Join(sk.Dir, filepath.FromSlash(rel)))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", rel, err)
		}
		np.LocalDigests[rel] = sum
	}
	return np, nil
}

// keyDoc is what of the Node half goes into the key (the file:
// dependencies' digests go in separately, as "local").
func (p *NodePlan) keyDoc() map[string]any {
	return map[string]any{"dependencies": p.Deps.Dependencies, "lock": p.Deps.Lock, "interpreter": p.Interpreter}
}

// node builds the node/ folder of an environment: npm installs into
// node/node_modules from a package.json of the dependencies alone (and
// the skill's file: dependencies), `npm ci` when there is a lock.
// npm's package-lock.json gives the installed packages and the lock a
// first build resolved.
type node struct {
	plan   *NodePlan
	index  Index
	policy Policy
}

func (n *node) indexURL() (string, string) {
	url := n.index.NpmRegistry
	if url == "" {
		url = DefaultNpmRegistry
	}
	return url, "npm.index.skillrun.internal"
}

func (n *node) stage(b *build, a *indexAccess) error {
	nd := n.plan
	nodeDir := filepath.Join(b.staging, "node")
	if err := os.MkdirAll(nodeDir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(nodeDir, "package.json"), nd.Deps.PackageJSON(), 0o644); err != nil {
		return err
	}
	for _, rel := range nd.Deps.LocalFiles {
		if err := copyPath(nd.Dir, rel, nodeDir); err != nil {
			return fmt.Errorf("node: %s: %w", rel, err)
		}
	}
	lock := []byte(nd.Deps.Lock)
	if lock == nil {
		lock, _ = os.ReadFile(b.resolvedPath("package-lock.json"))
	}
	verb := "install"
	if len(lock) > 0 {
		if err := os.WriteFile(filepath.Join(nodeDir, "package-lock.json"), lock, 0o644); err != nil {
			return err
		}
		verb = "ci"
	}
	args := []string{"npm", verb, "--omit=dev", "--no-audit", "--no-fund", "--no-update-notifier",
		"--registry", a.URL, "--cache", "/tmp/.npm", "--loglevel", "warn"}
	if !n.policy.InstallScripts {
		args = append(args, "--ignore-scripts")
	}
	b.script = append(b.script, "echo '== npm "+verb+"'", "cd /workspace/node", shellJoin(args),
		// An environment without any package still has the folder.
		"mkdir -p /workspace/node/node_modules")
	if n.index.NpmCAFile != "" {
		path, err := stageCA(b.staging, n.index.NpmCAFile, "npm-ca.pem")
		if err != nil {
			return err
		}
		b.env["NODE_EXTRA_CA_CERTS"] = path
	}
	b.env["npm_config_userconfig"] = "/tmp/.npmrc-user-none"
	b.env["npm_config_globalconfig"] = "/tmp/.npmrc-global-none"
	b.marker.Node = true
	return nil
}

func (n *node) collect(b *build) error {
	data, err := os.ReadFile(filepath.Join(b.staging, "node", "package-lock.json"))
	if err != nil {
		return fmt.Errorf("npm left no package-lock.json: %w", err)
	}
	pkgs, err := parseNpmLock(data)
	if err != nil {
		return err
	}
	b.marker.NodePackages = pkgs
	if n.plan.Deps.Lock == nil {
		if err := safefs.WriteFileAtomic(b.resolvedPath("package-lock.json"), data, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// parseNpmLock lists the packages of an npm lock file (v2/v3) as
// name@version.
func parseNpmLock(b []byte) ([]string, error) {
	var lock struct {
		Packages map[string]struct {
			Version string `json:"version"`
			Name    string `json:"name"`
		} `json:"packages"`
	}
	if err := json.Unmarshal(b, &lock); err != nil {
		return nil, fmt.Errorf("package-lock.json: %w", err)
	}
	var out []string
	for p, v := range lock.Packages {
		i := strings.LastIndex(p, "node_modules/")
		if i < 0 {
			continue
		}
		name := p[i+len("node_modules/"):]
		out = append(out, name+"@"+v.Version)
	}
	sort.Strings(out)
	return out, nil
}

// copyPath copies the file or folder rel of the skill folder dir to
// dst/rel: regular files and folders, symlinks as symlinks. Every file is
// opened beneath dir without following symlinks (safefs.OpenBeneath): the skill's
// owner cannot swap in a link to a host file while skillrun, as root,
// copies it into the build.
func copyPath(dir, rel, dst string) error {
	src := filepath.Join(dir, filepath.FromSlash(rel))
	return filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		r, _ := filepath.Rel(dir, p)
		d := filepath.Join(dst, r)
		switch {
		case fi.IsDir():
			return os.MkdirAll(d, 0o755)
		case fi.Mode()&os.ModeSymlink != 0:
			t, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(t, d)
		case fi.Mode().IsRegular():
			if err := os.MkdirAll(filepath.Dir(d), 0o755); err != nil {
				return err
			}
			return safefs.CopyBeneath(dir, r, d, 0o644)
		}
		return fmt.Errorf("%s: not a file, folder or symlink", r)
	})
}
