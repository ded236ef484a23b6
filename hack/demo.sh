#!/usr/bin/env bash
# Runs every example skill through `BIN skill run` and prints one compact
# line per run: as the calling user (root or rootless), and, when run by
# root and the unprivileged user skillrun-test exists (hack/ensure-test-user.sh),
# again as that user, rootless.
#
#   hack/demo.sh [BIN]      (default: bin/skillrun)
set -uo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=hack/lib/common.sh
. "$here/hack/lib/common.sh"
bin=${1:-$here/bin/skillrun}
case $bin in /*) ;; *) bin=$PWD/$bin ;; esac
if [ ! -x "$bin" ]; then
	echo "demo: $bin is not an executable (build it with make)" >&2
	exit 1
fi
skills=$here/examples/skills
user=${SKILLRUN_TEST_USER:-skillrun-test}
failures=0

# summarize prints "ok/stopped  wall  peak  output" from a result on stdin.
summarize() {
	python3 -c '
import json, sys
raw = sys.stdin.read()
try:
    r = json.loads(raw)
except ValueError:
    print("  (no JSON result) " + raw[:200].replace("\n", " "))
    sys.exit(0)
out = r.get("output")
out = json.dumps(out, separators=(",", ":")) if not isinstance(out, str) else out
if r.get("error"):
    out = r["error"]
out = out.strip()
if not out and r.get("stderr"):
    out = "stderr: " + r["stderr"].strip().splitlines()[-1]
lim = r.get("limits") or {}
mem_by = ((lim.get("enforcement") or {}).get("memory") or {}).get("enforced_by", "none")
enforced = "cgroups" if lim.get("cgroups") else (("rlimits" if mem_by.startswith("rlimit_") else "no cgroups") if lim else "-")
status = "ok" if r["ok"] else (r.get("stopped_reason") or "failed")
u = r["usage"]
out = " ".join(out.split())
if len(out) > 110:
    out = out[:110].rsplit(" ", 1)[0] + " ..."
print("  %-12s %5d ms %6.1f MiB  [%s]  %s" % (status, u["wall_ms"], u["peak_memory_bytes"] / 2**20, enforced, out))
'
}

# show prints the skillrun command line of CMD... (after any runuser
# prefix), folders shortened to their names.
show() {
	local a out=() seen=0
	for a in "$@"; do
		if [ "$seen" = 0 ]; then
			[ "$a" = "$bin" ] && seen=1
			continue
		fi
		case $a in
		/*) a=$(basename "$a") ;;
		*" "* | *'"'* | *'{'*) a="'$a'" ;;
		esac
		out+=("$a")
	done
	echo "               \$ skillrun ${out[*]}"
}

# run_one WANT LABEL CMD... runs one example and checks its exit code.
run_one() {
	local want=$1 name=$2
	shift 2
	show "$@"
	printf '%-15s' "$name"
	local out rc
	out=$("$@" 2>/tmp/skillrun-demo.err.$$)
	rc=$?
	if ! printf '%s' "$out" | summarize; then
		failures=$((failures + 1))
	fi
	if [ "$rc" -ne "$want" ]; then
		echo "  !! exit code $rc, expected $want: $(tail -n 3 /tmp/skillrun-demo.err.$$)"
		failures=$((failures + 1))
	fi
	rm -f /tmp/skillrun-demo.err.$$
}

# demo PREFIX... runs every example with the command prefix (empty, or
# runuser ... for the unprivileged user).
demo() {
	local ws
	ws=$(mktemp -d /tmp/skillrun-demo-ws.XXXXXX)
	chmod 0755 "$ws"
	if [ "$(id -u)" -eq 0 ]; then
		# As root the sandbox maps to the workspace owner: give it one.
		if [ $# -gt 0 ]; then chown "$user:" "$ws"; else chown 65534:65534 "$ws"; fi
	fi
	run_one 0 calculator "$@" "$bin" skill run --input '{"expression": "2 * (3 + 4) ** 2 / sqrt(16)"}' "$skills/calculator"
	run_one 0 text-stats "$@" "$bin" skill run --input '{"text": "the quick brown fox jumps over the lazy dog\nthe end", "top": 2}' "$skills/text-stats"
	run_one 0 csv-summary "$@" "$bin" skill run --input '{"data": "city,temp\nParis,20\nRome,25\nParis,22", "group_by": "city"}' "$skills/csv-summary"
	run_one 0 json-transform "$@" "$bin" skill run --input '{"data": {"items": [{"name": "pen", "qty": 3}, {"name": "ink", "qty": 0}]}, "query": "[.items[] | select(.qty > 0) | .name]"}' "$skills/json-transform"
	run_one 0 save-note "$@" "$bin" skill run --workspace "$ws" --input '{"path": "notes/demo.md", "content": "# written from the sandbox\n"}' "$skills/save-note"
	if [ -f "$ws/notes/demo.md" ]; then
		echo "               host sees $ws/notes/demo.md: $(head -c 40 "$ws/notes/demo.md")"
	else
		echo "  !! $ws/notes/demo.md was not written"
		failures=$((failures + 1))
	fi
	# A skill with a third-party package (npm "slugify", pinned by its
	# package-lock.json): prepared once, sandboxed, network only to the
	# registry; then every run mounts the read-only environment.
	local envs
	envs=$(mktemp -d /tmp/skillrun-demo-envs.XXXXXX)
	chmod 0755 "$envs"
	[ $# -gt 0 ] && [ "$(id -u)" -eq 0 ] && chown "$user:" "$envs"
	printf '%-15s' "slugify prep"
	if "$@" "$bin" skill prepare --env-cache "$envs/c" "$skills/slugify" >"$envs.out" 2>"$envs.err"; then
		python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); b=(r.get("build") or {}); print("  %-12s %5d ms  %s, build network %s" % (r["status"], r.get("build_ms", 0), ",".join(r.get("node") or []), ((b.get("network") or {}).get("hosts"))))' "$envs.out"
		run_one 0 slugify "$@" "$bin" skill run --env-cache "$envs/c" --no-prepare --input '{"titles": ["Hello, World!", "Crème brûlée à la carte"]}' "$skills/slugify"
	else
		echo "  !! skill prepare failed: $(tail -n 2 "$envs.err")"
		failures=$((failures + 1))
	fi
	chmod -R u+w "$envs" 2>/dev/null
	rm -rf "$envs" "$envs.out" "$envs.err"
	run_one 6 fetch-url "$@" "$bin" skill run --input '{"url": "https://example.com"}' "$skills/fetch-url"
	# The allowlist: a local web server stands for an API the operator
	# grants (--allow-host; --resolve maps the name to loopback, which the
	# allowlist refuses otherwise); another name on the same server is not
	# granted and is never reached.
	local g=(--allow-host "docs.demo.test:$port" --resolve "docs.demo.test:$port:127.0.0.1")
	printf '%s' "allowed" >"$www/hello.txt"
	allowed_runs=$((allowed_runs + 1))
	run_one 0 "fetch allowed" "$@" "$bin" skill run "${g[@]}" --input "{\"url\": \"http://docs.demo.test:$port/hello.txt\"}" "$skills/fetch-url"
	run_one 3 "fetch other" "$@" "$bin" skill run "${g[@]}" --input "{\"url\": \"http://other.demo.test:$port/hello.txt\"}" "$skills/fetch-url"
	exec_demo "$ws" "$@"
	rm -rf "$ws"
}

# exec_demo WS PREFIX... uses a skill as agents use one (skill exec: its
# scripts with arguments on workspace files) and runs a command without a
# skill (sandbox), each with something the sandbox contained.
exec_demo() {
	local ws=$1 owner
	shift
	owner=$(stat -c %u:%g "$ws")
	printf 'region,amount\nnorth,120\nsouth,80\neast,200\n' >"$ws/sales.csv"
	chown "$owner" "$ws/sales.csv" 2>/dev/null
	local envs
	envs=$(mktemp -d /tmp/skillrun-demo-envs.XXXXXX)
	chmod 0755 "$envs"
	[ "$(id -u)" -eq 0 ] && [ $# -gt 0 ] && chown "$user:" "$envs"
	local x=(skill exec --env-cache "$envs/c" --pip-index-url "http://127.0.0.1:$port/simple/" --workspace "$ws" "$skills/table-report" --)
	run_one 0 "exec script" "$@" "$bin" "${x[@]}" python3 scripts/csv_to_json.py sales.csv rows.json
	run_one 0 "exec argparse" "$@" "$bin" "${x[@]}" python3 scripts/render_table.py rows.json report.md --column amount --title Sales
	if grep -q '^# Sales' "$ws/report.md" 2>/dev/null; then
		echo "               host sees WS/report.md: $(sed -n 3p "$ws/report.md")"
	else
		echo "  !! $ws/report.md was not written"
		failures=$((failures + 1))
	fi
	run_one 3 "exec contained" "$@" "$bin" "${x[@]}" sh -c 'echo x >> /skill/SKILL.md'
	chmod -R u+w "$envs" 2>/dev/null
	rm -rf "$envs"
	# sandbox: any command, no skill. The caller's secret, the host's
	# shadow file and home folders stay out; only the workspace is written.
	echo "               \$ DEMO_SECRET=s3cret skillrun sandbox --workspace WS -- sh -c 'cat /etc/shadow; ls /root /home; echo \"[\$DEMO_SECRET]\"'"
	printf '%-15s' "sandbox"
	local out
	out=$(DEMO_SECRET=s3cret "$@" "$bin" sandbox --workspace "$ws" -- sh -c 'cat /etc/shadow 2>&1; ls /root /home 2>&1; echo "secret=[$DEMO_SECRET]"; echo written > from-sandbox.txt' 2>&1)
	if [ "$(cat "$ws/from-sandbox.txt" 2>/dev/null)" = written ] && grep -q 'secret=\[\]' <<<"$out" && ! grep -q s3cret <<<"$out" && ! grep -q '^root:' <<<"$out"; then
		echo "  contained    no /etc/shadow, no /root or /home, DEMO_SECRET not passed; WS/from-sandbox.txt written"
	else
		echo "  !! not contained as expected: $(tr '\n' ' ' <<<"$out" | cut -c1-200)"
		failures=$((failures + 1))
	fi
}

# standin_wheel writes a PEP 503 index entry for a stand-in of the
# "tabulate" package (the one call table-report makes) under DIR/simple:
# no PyPI here; with PyPI the real package is installed the same way.
standin_wheel() {
	python3 - "$1" <<'PY'
import base64, hashlib, os, sys, zipfile
d = os.path.join(sys.argv[1], "simple", "tabulate")
os.makedirs(d, exist_ok=True)
files = {
    "tabulate/__init__.py": 'def tabulate(rows, headers=(), tablefmt="github"):\n'
    '    out = ["| " + " | ".join(map(str, headers)) + " |", "|" + "|".join("---" for _ in headers) + "|"]\n'
    '    return "\\n".join(out + ["| " + " | ".join(map(str, r)) + " |" for r in rows])\n',
    "tabulate-0.9.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: tabulate\nVersion: 0.9.0\n",
    "tabulate-0.9.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: skillrun-demo\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
record = "".join("%s,sha256=%s,%d\n" % (n, base64.urlsafe_b64encode(hashlib.sha256(b.encode()).digest()).rstrip(b"=").decode(), len(b)) for n, b in files.items())
files["tabulate-0.9.0.dist-info/RECORD"] = record + "tabulate-0.9.0.dist-info/RECORD,,\n"
with zipfile.ZipFile(os.path.join(d, "tabulate-0.9.0-py3-none-any.whl"), "w") as z:
    for n, b in files.items():
        z.writestr(n, b)
PY
}

allowed_runs=0
# A web server on this host's loopback for the allowlist examples; it
# stops with the demo.
www=$(mktemp -d /tmp/skillrun-demo-www.XXXXXX)
chmod 0755 "$www"
port=$(free_port)
python3 -m http.server --bind 127.0.0.1 --directory "$www" "$port" >"$www.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; rm -rf "$www" "$www.log"' EXIT
wait_port "$port"
standin_wheel "$www"

cat <<'LEGEND'
Each example: the command, then  NAME  STATUS  WALL  PEAK-MEMORY  [LIMITS]  OUTPUT
  STATUS   ok; failed (exit code not 0); or why skillrun stopped it (policy: refused before
           running, nothing ran; timeout, memory, pids, output_limit)
  [LIMITS] cgroups: memory, CPU and tasks bounded by the sandbox's own cgroups;
           rlimits: per-process rlimits (rootless without delegated cgroups); -: nothing ran
  Every run: no network unless granted, none of your variables or files, a read-only root.
LEGEND
echo
echo "== skillrun skill run, as $(id -un) (uid $(id -u)$([ "$(id -u)" -ne 0 ] && echo ', rootless'))"
demo
if [ "$(id -u)" -eq 0 ]; then
	if id "$user" >/dev/null 2>&1; then
		uid=$(id -u "$user")
		# The user must reach the binary and the skills: a checkout in a
		# folder only root enters gets copies in a world-readable one.
		if ! runuser -u "$user" -- test -x "$bin" || ! runuser -u "$user" -- test -r "$skills/calculator/SKILL.md"; then
			stage=$(mktemp -d /tmp/skillrun-demo-stage.XXXXXX)
			chmod 0755 "$stage"
			cp "$bin" "$stage/skillrun" && cp -r "$here/examples" "$stage/examples" && chmod -R a+rX "$stage"
			bin=$stage/skillrun skills=$stage/examples/skills
			echo "(rootless part: $user cannot reach the checkout; using copies in $stage, removed at the end)"
			trap 'kill $server 2>/dev/null; rm -rf "$www" "$www.log" "$stage"' EXIT
		fi
		echo
		echo "== skillrun skill run, as $user (uid $uid, rootless)"
		demo runuser -u "$user" -- env XDG_RUNTIME_DIR="/run/user/$uid" HOME="$(getent passwd "$user" | cut -d: -f6)"
	else
		echo
		echo "(rootless part skipped: no user $user; create it with hack/ensure-test-user.sh)"
	fi
fi
echo
requests=$(grep -c '"GET /hello.txt' "$www.log")
echo "the local web server logged $requests request(s): one per allowed fetch; the other name never reached it"
if [ "$requests" -ne "$allowed_runs" ]; then
	echo "  !! expected $allowed_runs request(s)"
	failures=$((failures + 1))
fi
if [ "$failures" -ne 0 ]; then
	echo "demo: $failures unexpected result(s)" >&2
	exit 1
fi
echo "demo: every example behaved as expected (fetch-url is refused by policy when no network is granted, and reaches only the granted host)"
