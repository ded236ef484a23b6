package skillenv

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/skillrun/skillrun/internal/lazyre"
	"github.com/skillrun/skillrun/internal/safefs"
	"github.com/skillrun/skillrun/spec"
)

// PythonPlan is the Python half of a plan.
type PythonPlan struct {
	Deps        *spec.PythonDeps
	Interpreter Interpreter
	// Name is "python3.11".
	Name string
}

// planPython is the Python half of sk's plan: the interpreter the skill
// runs (python3, or its Python entry's) and the venv's name for it.
func planPython(sk *spec.Skill, d *spec.PythonDeps) (*PythonPlan, error) {
	name := "python3"
	if sk.Entry.Kind == spec.KindPython && len(sk.Entry.Interpreter) > 0 {
		name = sk.Entry.Interpreter[0]
	}
	in, err := lookInterpreter(name)
	if err != nil {
		return nil, err
	}
	pn, err := pythonName(in)
	if err != nil {
		return nil, err
	}
	return &PythonPlan{Deps: d, Interpreter: in, Name: pn}, nil
}

// keyDoc is what of the Python half goes into the key.
func (p *PythonPlan) keyDoc() map[string]any {
	return map[string]any{"requirements": p.Deps.Requirements, "lock": p.Deps.Lock, "interpreter": p.Interpreter}
}

var pythonVersionRE = lazyre.New(`^python(\d+\.\d+)$`)

// pythonName is the base interpreter's name, "python3.11": a venv's
// site-packages folder is lib/<name>/site-packages.
func pythonName(in Interpreter) (string, error) {
	base := filepath.Base(in.Path)
	if !pythonVersionRE().MatchString(base) {
		return "", fmt.Errorf("cannot tell the Python version of %s (want an executable named pythonX.Y)", in.Path)
	}
	return base, nil
}

// python builds the python/ folder of an environment: a venv made by
// hand whose site-packages pip installs into (--target), from the
// requirements or, when there is one, a lock pinning every distribution
// by hash. pip's installation report gives the installed distributions
// and the lock a first build resolved.
type python struct {
	plan   *PythonPlan
	index  Index
	policy Policy
}

func (p *python) indexURL() (string, string) {
	url := p.index.PipIndexURL
	if url == "" {
		url = DefaultPipIndex
	}
	return url, "pypi.index.skillrun.internal"
}

func (p *python) stage(b *build, a *indexAccess) error {
	py := p.plan
	site := filepath.Join("python", "lib", py.Name, "site-packages")
	if err := os.MkdirAll(filepath.Join(b.staging, site), 0o755); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(b.staging, "python", "bin"), 0o755); err != nil {
		return err
	}
	// A venv by hand: bin/python3 is the base interpreter (the
	// sandbox's /usr is the host's), pyvenv.cfg makes Python take
	// lib/pythonX.Y/site-packages as its site folder, system
	// site-packages excluded.
	if err := os.Symlink(py.Interpreter.Path, filepath.Join(b.staging, "python", "bin", "python3")); err != nil {
		return err
	}
	cfg := fmt.Sprintf("home = %s\ninclude-system-site-packages = false\nversion = %s\n",
		filepath.Dir(py.Interpreter.Path), strings.TrimPrefix(py.Name, "python"))
	if err := os.WriteFile(filepath.Join(b.staging, "python", "pyvenv.cfg"), []byte(cfg), 0o644); err != nil {
		return err
	}
	lock := py.Deps.Lock
	if lock == nil {
		lock = b.resolvedLines("requirements.lock")
	}
	args := []string{py.Interpreter.Path, "-s", "-E", "-m", "pip", "install", "--isolated", "--no-input",
		"--disable-pip-version-check", "--no-cache-dir", "--no-warn-script-location", "--progress-bar", "off",
		"--target", "/workspace/" + site, "--report", "/workspace/pip-report.json", "--index-url", a.URL}
	if a.Insecure != "" {
		args = append(args, "--trusted-host", a.Insecure)
	}
	if p.index.PipCert != "" {
		path, err := stageCA(b.staging, p.index.PipCert, "pip-ca.pem")
		if err != nil {
			return err
		}
		args = append(args, "--cert", path)
	}
	if p.policy.SourceBuilds {
		// Source builds use the interpreter's own setuptools (no
		// build isolation: that would fetch build tools).
		args = append(args, "--no-build-isolation")
	} else {
		args = append(args, "--only-binary", ":all:")
	}
	if lock != nil {
		if err := os.WriteFile(filepath.Join(b.staging, "requirements.lock"), []byte(strings.Join(lock, "\n")+"\n"), 0o644); err != nil {
			return err
		}
		args = append(args, "--require-hashes", "--no-deps", "-r", "/workspace/requirements.lock")
	} else {
		if err := os.WriteFile(filepath.Join(b.staging, "requirements.txt"), []byte(strings.Join(py.Deps.Requirements, "\n")+"\n"), 0o644); err != nil {
			return err
		}
		args = append(args, "-r", "/workspace/requirements.txt")
	}
	b.script = append(b.script, "echo '== pip install'", shellJoin(args))
	b.marker.PythonName = py.Name
	return nil
}

func (p *python) collect(b *build) error {
	data, err := os.ReadFile(filepath.Join(b.staging, "pip-report.json"))
	if err != nil {
		return fmt.Errorf("pip left no report: %w", err)
	}
	pkgs, lock, err := parsePipReport(data)
	if err != nil {
		return err
	}
	b.marker.Python = pkgs
	if p.plan.Deps.Lock == nil {
		text := strings.Join(lock, "\n") + "\n"
		if err := os.WriteFile(filepath.Join(b.staging, "requirements.lock"), []byte(text), 0o644); err != nil {
			return err
		}
		if err := safefs.WriteFileAtomic(b.resolvedPath("requirements.lock"), []byte(text), 0o600); err != nil {
			return err
		}
	}
	return nil
}

// parsePipReport reads pip's installation report (pip install --report):
// the installed distributions as name==version, and lock lines pinning
// each with the sha256 of what was downloaded.
func parsePipReport(b []byte) ([]string, []string, error) {
	var rep struct {
		Install []struct {
			DownloadInfo struct {
				URL         string `json:"url"`
				ArchiveInfo struct {
					Hash   string            `json:"hash"`
					Hashes map[string]string `json:"hashes"`
				} `json:"archive_info"`
			} `json:"download_info"`
			Metadata struct {
				Name    string `json:"name"`
				Version string `json:"version"`
			} `json:"metadata"`
		} `json:"install"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		return nil, nil, fmt.Errorf("pip report: %w", err)
	}
	var pkgs, lock []string
	for _, in := range rep.Install {
		name, ver := in.Metadata.Name, in.Metadata.Version
		if name == "" || ver == "" {
			return nil, nil, errors.New("pip report: an installed distribution has no name or version")
		}
		sum := in.DownloadInfo.ArchiveInfo.Hashes["sha256"]
		if sum == "" {
			if h, ok := strings.CutPrefix(in.DownloadInfo.ArchiveInfo.Hash, "sha256="); ok {
				sum = h
			}
		}
		if sum == "" {
			return nil, nil, fmt.Errorf("pip report: %s %s has no sha256 (not from an index archive?)", name, ver)
		}
		pkgs = append(pkgs, name+"=="+ver)
		lock = append(lock, fmt.Sprintf("%s==%s --hash=sha256:%s", name, ver, sum))
	}
	sort.Strings(pkgs)
	sort.Strings(lock)
	return pkgs, lock, nil
}
