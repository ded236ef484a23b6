package layout

import (
	"bufio"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// repoRoot is the module's root folder, two up from this package.
const repoRoot = "../.."

// module reads the module path from go.mod.
func module(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(data), "\n") {
		if m, ok := strings.CutPrefix(l, "module "); ok {
			return strings.TrimSpace(m)
		}
	}
	t.Fatal("go.mod: no module line")
	return ""
}

// toolsFloor is the floor of hack/...: tools that may import any floor
// but the CLI's.
const toolsFloor = -1

// floors reads the floors table of docs/architecture.md: package path
// (relative to the module) -> floor.
func floors(t *testing.T) (map[string]int, int) {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]int{}
	top := 0
	in := false
	pkg := regexp.MustCompile("`([^`]+)`")
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "<!-- floors: begin"):
			in = true
			continue
		case strings.HasPrefix(l, "<!-- floors: end"):
			in = false
		}
		if !in || !strings.HasPrefix(l, "| ") {
			continue
		}
		cells := strings.Split(l, "|")
		if len(cells) < 4 {
			continue
		}
		name := strings.TrimSpace(cells[1])
		floor := toolsFloor
		if name != "tools" {
			n, err := strconv.Atoi(name)
			if err != nil {
				continue // the header row
			}
			floor = n
			top = max(top, n)
		}
		for _, m := range pkg.FindAllStringSubmatch(cells[2], -1) {
			out[strings.TrimSuffix(m[1], "/...")] = floor
		}
	}
	if len(out) == 0 {
		t.Fatal("docs/architecture.md: no floors table between the floors markers")
	}
	return out, top
}

// floorOf is the floor of the package at rel (hack/... is tools).
func floorOf(table map[string]int, rel string) (int, bool) {
	if rel == "hack" || strings.HasPrefix(rel, "hack/") {
		return toolsFloor, true
	}
	f, ok := table[rel]
	return f, ok
}

// imports returns, per package folder (relative), the imports of its
// non-test Go files, whatever their build tags.
func imports(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(repoRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(repoRoot, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			switch {
			case rel == ".":
				return nil
			case strings.HasPrefix(d.Name(), "."), d.Name() == "testdata", d.Name() == "node_modules",
				rel == "tests", rel == "docs", rel == "examples", rel == "bin", rel == "tmp":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		dir := filepath.ToSlash(filepath.Dir(rel))
		for _, im := range f.Imports {
			path, _ := strconv.Unquote(im.Path.Value)
			if !slices.Contains(out[dir], path) {
				out[dir] = append(out[dir], path)
			}
		}
		if _, ok := out[dir]; !ok {
			out[dir] = nil
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestFloors: every package is in the floors table, imports only lower
// floors, and the runc, CLI and logging libraries stay in their places.
func TestFloors(t *testing.T) {
	mod := module(t)
	table, top := floors(t)
	pkgs := imports(t)
	if len(pkgs) < 10 {
		t.Fatalf("found only %d packages under %s: the walk is wrong", len(pkgs), repoRoot)
	}
	dirs := make([]string, 0, len(pkgs))
	for d := range pkgs {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	for _, dir := range dirs {
		from, ok := floorOf(table, dir)
		if !ok {
			t.Errorf("package %s is not in the floors table of docs/architecture.md: add it to its floor", dir)
			continue
		}
		for _, im := range pkgs[dir] {
			if problem := checkImport(mod, table, top, dir, from, im); problem != "" {
				t.Errorf("%s imports %s: %s", dir, im, problem)
			}
		}
	}
	for rel := range table {
		if _, ok := pkgs[rel]; !ok && rel != "hack" {
			t.Errorf("docs/architecture.md lists %s, which is not a package here", rel)
		}
	}
}

// checkImport says what is wrong with dir (on floor from) importing im,
// or "".
func checkImport(mod string, table map[string]int, top int, dir string, from int, im string) string {
	under := func(prefix string) bool { return dir == prefix || strings.HasPrefix(dir, prefix+"/") }
	switch {
	case strings.HasPrefix(im, "github.com/opencontainers/runc/"):
		if !under("runtime/linux") && dir != "hack/lcfloor" {
			return "runc is imported only under runtime/linux"
		}
		return ""
	case im == "github.com/urfave/cli/v2" || strings.HasPrefix(im, "github.com/urfave/cli/"):
		if !under("cmd") {
			return "the CLI library belongs to cmd/"
		}
		return ""
	case im == "github.com/sirupsen/logrus":
		if !under("cmd") && !under("runtime/linux") && from != toolsFloor {
			return "libraries return errors and warnings; only cmd/ (and runtime/linux, for libcontainer's logger) log"
		}
		return ""
	}
	rel, ok := strings.CutPrefix(im, mod+"/")
	if !ok {
		return "" // the standard library or another module
	}
	to, ok := floorOf(table, rel)
	switch {
	case !ok:
		return "not in the floors table"
	case to == top:
		return "nothing imports the CLI"
	case from == toolsFloor:
		return ""
	case to == toolsFloor:
		return "hack/ is tools, not a library"
	case to >= from:
		return "floor " + strconv.Itoa(to) + " is not below this package's floor " + strconv.Itoa(from)
	}
	return ""
}

// TestCheckImport: the rules catch what they are for (a test of the test:
// each rule fires on a violation and stays quiet on a legal import).
func TestCheckImport(t *testing.T) {
	const mod = "example.org/m"
	table := map[string]int{"leaf": 0, "runtime": 1, "spec": 2, "egress": 2, "runtime/linux": 3, "runner": 4, "cmd/x": 7}
	for _, c := range []struct {
		dir, im string
		bad     bool
	}{
		{"spec", mod + "/egress", true},                                 // same floor: a server package from spec
		{"spec", mod + "/runner", true},                                 // upwards
		{"spec", mod + "/leaf", false},                                  // downwards
		{"runner", mod + "/cmd/x", true},                                // the CLI from anywhere
		{"runner", "github.com/opencontainers/runc/libcontainer", true}, // runc outside runtime/linux
		{"runtime/linux", "github.com/opencontainers/runc/libcontainer", false},
		{"spec", "github.com/sirupsen/logrus", true},
		{"runner", "github.com/urfave/cli/v2", true},
		{"hack/tool", mod + "/runner", false},
		{"hack/tool", mod + "/cmd/x", true},
		{"runner", mod + "/unlisted", true},
		{"runner", "encoding/json", false},
	} {
		from, _ := floorOf(table, c.dir)
		if got := checkImport(mod, table, 7, c.dir, from, c.im); (got != "") != c.bad {
			t.Errorf("%s importing %s: %q, want a problem: %v", c.dir, c.im, got, c.bad)
		}
	}
}

// TestRuntimeBinaryLinks: skillrun, the OCI runtime (cmd/skillrun with the
// runtimeonly tag), links none of what only the skills runner, the MCP
// server, the egress server or the OpenShell driver need: every verb a
// shim calls and every container's init would pay their package
// initialisation (docs/performance.md). The whole program (no tag) does
// link them, which shows the check sees them.
func TestRuntimeBinaryLinks(t *testing.T) {
	mod := module(t)
	forbidden := []string{
		"net/http", "crypto/tls", "encoding/gob",
		"go.yaml.in/yaml/v3", "github.com/google/jsonschema-go/jsonschema",
		"github.com/modelcontextprotocol/go-sdk/mcp", "google.golang.org/grpc",
		mod + "/spec", mod + "/runner", mod + "/mcpserver", mod + "/skillenv",
		mod + "/egress", mod + "/openshell",
	}
	deps := func(tags string) map[string]bool {
		cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "list", "-deps", "-tags", tags, "./cmd/skillrun")
		cmd.Dir = repoRoot
		cmd.Env = append(os.Environ(), "GOOS=linux", "CGO_ENABLED=1")
		out, err := cmd.Output()
		if err != nil {
			t.Skipf("skipped: go list -deps cannot run here: %v", err)
		}
		set := map[string]bool{}
		for _, p := range strings.Fields(string(out)) {
			set[p] = true
		}
		return set
	}
	lean, whole := deps("seccomp osusergo netgo urfave_cli_no_docs runtimeonly"), deps("seccomp osusergo netgo urfave_cli_no_docs")
	for _, p := range forbidden {
		if p == mod+"/openshell" || p == "google.golang.org/grpc" {
			continue // the openshell tag's only
		}
		if !whole[p] {
			t.Errorf("the whole program does not link %s: this check is stale", p)
		}
	}
	for _, p := range forbidden {
		if lean[p] {
			t.Errorf("skillrun (runtimeonly) links %s", p)
		}
	}
	if !lean["github.com/opencontainers/runc/libcontainer"] {
		t.Errorf("skillrun (runtimeonly) does not link libcontainer: the go list is wrong")
	}
}
