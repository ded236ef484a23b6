//go:build integration

package skills_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// inspector returns the command line that runs the MCP Inspector's CLI
// (@modelcontextprotocol/inspector, installed from the npm registry by
// hack/install-deps.sh test at the versions tests/mcp-inspector's lock
// file pins, with the Node.js it needs). Without a node on this machine
// the test skips, unless CI is set; with node but no installed
// inspector it fails: run hack/install-deps.sh test.
func inspector(t *testing.T) []string {
	t.Helper()
	dir := filepath.Join(repo, "tests", "mcp-inspector", "node_modules")
	node := filepath.Join(dir, ".bin", "node")
	cli := filepath.Join(dir, "@modelcontextprotocol", "inspector", "clients", "launcher", "build", "index.js")
	if _, err := exec.LookPath("node"); err != nil && os.Getenv("CI") == "" {
		t.Skip("skipped: no node on this machine (and CI is unset)")
	}
	for _, f := range []string{node, cli} {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("the MCP Inspector is not installed (%v): run hack/install-deps.sh test", err)
		}
	}
	return []string{node, cli, "--cli"}
}

// runInspector runs the inspector's CLI against `skillrun mcp serve
// --skills examples/skills` started as the mode's user, with args (the
// method and its options), and decodes its JSON output.
func runInspector(t *testing.T, m *mode, args ...string) map[string]any {
	t.Helper()
	return runInspectorServe(t, m, nil, args...)
}

// runInspectorServe is runInspector with more flags for mcp serve.
func runInspectorServe(t *testing.T, m *mode, serveFlags []string, args ...string) map[string]any {
	t.Helper()
	server := m.command(append([]string{"--root", filepath.Join(m.tmp, "state"), "mcp", "serve", "--skills", filepath.Join(m.data, "examples", "skills")}, serveFlags...)...)
	// The inspector's options first: the server's command line (runuser
	// ... -- env ... as the rootless user) follows "--".
	cmdline := append(inspector(t), args...)
	cmdline = append(cmdline, "-e", "TMPDIR="+m.tmp, "--")
	cmdline = append(cmdline, server.Args...)
	cmd := exec.Command(cmdline[0], cmdline[1:]...)
	cmd.Env = append(os.Environ(), "MCP_CATALOG_PATH="+filepath.Join(t.TempDir(), "catalog.json"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	timer := time.AfterFunc(2*time.Minute, func() { _ = cmd.Process.Kill() })
	out, err := cmd.Output()
	timer.Stop()
	if err != nil {
		t.Fatalf("inspector %v: %v\nstdout: %.2000s\nstderr: %s", args, err, out, stderr.String())
	}
	var v map[string]any
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("inspector %v: output is not JSON: %v\n%.2000s", args, err, out)
	}
	return v
}

// TestMCPInspector drives `skillrun mcp serve` with a real third-party
// client, the MCP Inspector's CLI (TypeScript SDK): tools/list lists every
// example skill, tools/call runs the calculator in a sandbox, skills/list
// and skills/get (the Skills over MCP extension) and resources/read of a
// skill file with its digest; the server leaves nothing behind.
func TestMCPInspector(t *testing.T) {
	forEachMode(t, func(t *testing.T, m *mode) {
		list := runInspector(t, m, "--method", "tools/list")
		var names []string
		tools, _ := list["tools"].([]any)
		for _, x := range tools {
			names = append(names, x.(map[string]any)["name"].(string))
		}
		sort.Strings(names)
		// Every example with an entry point but those the server's grants
		// refuse (save-note needs a workspace, fetch-url the network),
		// and the command tools.
		want := []string{"read_file", "run_command", "write_file"}
		for _, e := range examples {
			if e != "save-note" && e != "fetch-url" {
				want = append(want, e)
			}
		}
		sort.Strings(want)
		if strings.Join(names, ",") != strings.Join(want, ",") {
			t.Errorf("tools/list: %v, want %v", names, want)
		}
		m.assertClean(t)

		call := runInspector(t, m, "--method", "tools/call", "--tool-name", "calculator", "--tool-arg", "expression=6*7")
		sc, _ := call["structuredContent"].(map[string]any)
		out, _ := sc["output"].(map[string]any)
		if call["isError"] == true || sc["ok"] != true || out["result"] != float64(42) {
			t.Errorf("tools/call calculator 6*7: %v", call)
		}
		if lim, _ := sc["limits"].(map[string]any); lim == nil || lim["network"] != "none" {
			t.Errorf("tools/call: no sandbox limits in the envelope: %v", sc)
		}
		m.assertClean(t)

		// A command in a skill's sandbox, as an agent using a skill runs it.
		cmd := runInspector(t, m, "--method", "tools/call", "--tool-name", "run_command", "--tool-arg", "skill=release-notes", "--tool-arg", "command=head -n 1 references/style.md")
		csc, _ := cmd["structuredContent"].(map[string]any)
		if cmd["isError"] == true || csc["ok"] != true || csc["output"] != "# House style for release notes\n" || csc["cwd"] != "/skill" {
			t.Errorf("tools/call run_command: %v", cmd)
		}
		m.assertClean(t)

		sl := runInspector(t, m, "--method", "skills/list")
		skills, _ := sl["skills"].([]any)
		if len(skills) != len(allExamples) {
			t.Fatalf("skills/list: %v", sl)
		}
		get := runInspector(t, m, "--method", "skills/get", "--uri", "skill://calculator/SKILL.md")
		sk, _ := get["skill"].(map[string]any)
		res, _ := sk["resources"].([]any)
		if sk["uri"] != "skill://calculator/SKILL.md" || len(res) == 0 {
			t.Fatalf("skills/get: %v", get)
		}
		first := res[0].(map[string]any)
		read := runInspector(t, m, "--method", "resources/read", "--uri", first["uri"].(string))
		contents, _ := read["contents"].([]any)
		if len(contents) != 1 {
			t.Fatalf("resources/read: %v", read)
		}
		text, _ := contents[0].(map[string]any)["text"].(string)
		sum := sha256.Sum256([]byte(text))
		disk, _ := os.ReadFile(filepath.Join(m.data, "examples", "skills", "calculator", "SKILL.md"))
		if "sha256:"+hex.EncodeToString(sum[:]) != first["digest"] || text != string(disk) {
			t.Errorf("resources/read %s: digest %v, read %d bytes, file %d bytes", first["uri"], first["digest"], len(text), len(disk))
		}
		m.assertClean(t)
	})
}

// TestMCPInspectorAgentFlow: the MCP Inspector's CLI uses an Agent Skill
// as an agent would, one call per server start (each its own session, so
// the server has one --workspace for all): read the skill's SKILL.md,
// write an input file, run two of the skill's scripts with arguments
// (their packages from the loopback index), read the report back; the
// report is on the host, in the workspace, and nothing else is left.
func TestMCPInspectorAgentFlow(t *testing.T) {
	forEachMode(t, func(t *testing.T, m *mode) {
		ix := newPyIndex(t)
		ix.addWheel(t, "tabulate", "0.9.0", tabulateStandIn)
		ws := workspace(t, m, nil)
		serve := []string{"--watch", "0", "--pool", "0", "--workspace", ws, "--env-cache", envCache(t, m), "--pip-index-url", ix.url()}
		read := runInspectorServe(t, m, serve, "--method", "resources/read", "--uri", "skill://table-report/SKILL.md")
		contents, _ := read["contents"].([]any)
		if len(contents) != 1 || !strings.Contains(fmt.Sprint(contents[0].(map[string]any)["text"]), "scripts/csv_to_json.py") {
			t.Fatalf("resources/read SKILL.md: %v", read)
		}
		w := runInspectorServe(t, m, serve, "--method", "tools/call", "--tool-name", "write_file",
			"--tool-arg", "path=sales.csv", "--tool-arg", "content="+salesCSV)
		if w["isError"] == true {
			t.Fatalf("write_file: %v", w)
		}
		run := runInspectorServe(t, m, serve, "--method", "tools/call", "--tool-name", "run_command", "--tool-arg", "skill=table-report",
			"--tool-arg", "command=python3 scripts/csv_to_json.py sales.csv rows.json")
		if sc, _ := run["structuredContent"].(map[string]any); run["isError"] == true || sc["ok"] != true {
			t.Fatalf("run_command csv_to_json: %v", run)
		}
		run = runInspectorServe(t, m, serve, "--method", "tools/call", "--tool-name", "run_command", "--tool-arg", "skill=table-report",
			"--tool-arg", "command=python3 scripts/render_table.py rows.json report.md --column amount --title Sales")
		if sc, _ := run["structuredContent"].(map[string]any); run["isError"] == true || sc["ok"] != true {
			t.Fatalf("run_command render_table: %v", run)
		}
		got := runInspectorServe(t, m, serve, "--method", "tools/call", "--tool-name", "read_file", "--tool-arg", "path=report.md")
		gc, _ := got["content"].([]any)
		if got["isError"] == true || len(gc) == 0 || !strings.HasPrefix(fmt.Sprint(gc[0].(map[string]any)["text"]), "# Sales\n") {
			t.Fatalf("read_file report.md: %v", got)
		}
		host, err := os.ReadFile(filepath.Join(ws, "report.md"))
		if err != nil || !strings.Contains(string(host), "total 400") {
			t.Errorf("report.md on the host: %v %q", err, host)
		}
		m.assertClean(t)
	})
}
