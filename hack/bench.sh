#!/usr/bin/env bash
# hack/bench.sh: skillrun against runc, crun, bubblewrap, bare python3 and a bare fork+exec, in one
# run, side by side. Run `hack/bench.sh --help` for usage.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=hack/lib/common.sh
. "$repo/hack/lib/common.sh"
# shellcheck source=hack/lib/bench-report.sh
. "$repo/hack/lib/bench-report.sh"

skillrun=${SKILLRUN:-$repo/bin/skillrun}
lcfloor=${LCFLOOR:-$repo/bin/lcfloor}
out=${BENCH_OUT:-$repo/tmp/bench}
write_docs=1
only_mcp=0
only_egress=0
quick=${BENCH_QUICK:-0}
runs=${BENCH_RUNS:-}
render_dir=

usage() {
	cat <<EOF
Usage: hack/bench.sh [options]        (make bench)

One command, one run, all peers side by side. Each figure is min / median / p95 of wall time over
>= 50 iterations after warm-up (hyperfine -N, no shell in the measured command), taken in 6 rounds
in which the peers of a table take turns (2 rounds with --quick; process start and cold run: 5 times as many),
so a shared machine's drift does not favour one peer:
  proc         process start: \`RT --version\` for skillrun, runc, crun (and skillrun-skills and
               skillrun-openshell, the companion binaries: what the split keeps off the runtime's path)
  init         the container's init up to libcontainer's: \`BINARY init\` with GODEBUG=inittrace=1,
               the clock at libcontainer's package init, skillrun (an OCI container's) and
               skillrun-skills (a skill sandbox's) vs lcfloor
  cold run     \`RT run\` of a /bin/true bundle (busybox-static rootfs, no tty, --root on a tmpfs)
               for skillrun, runc, crun, and a bare fork+exec of /bin/true as the floor
  create       \`RT create\` alone (the container is deleted in hyperfine's --prepare)
  start        \`RT start\` of a pre-created container (created in --prepare)
  skill        \`skillrun skill run\` of a generated hello-world Python skill vs bare python3, vs
               bwrap with an equivalent policy, vs \`runc run\` (and \`skillrun run\`) of the bundle
               \`skillrun skill bundle\` generates
  lcfloor      in the cold-run and skill tables: hack/lcfloor, the least a libcontainer caller can do
               (config.json -> specconv -> Create, Run, Wait, Destroy; no locks, hooks, state checks
               or exit report), on the same bundles: libcontainer's own cost on this machine, the
               floor under any runtime built on it (make lcfloor)
  throughput   200 cold runs at concurrency 2, runs/s per runtime (and lcfloor), and the CPU time
               (user + system, GNU time) per container; the peers take turns in 5 rounds
  mcp          \`skillrun mcp serve\` tools/call of the hello skill over stdio (the Go SDK's client; the warm
               rows of the targets through a raw JSON-RPC client), cold and warm, vs cold
               \`skill run\` vs bare python3: p50/p95/p99 and calls/s at concurrency 2 (hack/mcpbench)
  egress-rss   \`skill run\`'s own peak RSS (VmHWM sampled from /proc) idle and under the network
               allowlist attacks of tests/security (huge heads, a 160 MiB second head, a trickled
               head, 4000 held connections), 3 runs each (1 with --quick)
  egress-rss-mcp  the same through one long-lived \`skillrun mcp serve\` (stdio) per session, one
               tools/call per attack, idle first: its VmHWM after each call, 3 sessions (1 with --quick)
  memory       peak RSS (GNU time %M: the runtime and the children it waits for) and binary size
Prints the table and ratios to stdout (ratio = peer median / skillrun median; runc is the reference
when skillrun is not built), writes docs/benchmarks.md and docs/benchmarks.png (gnuplot) with the
data they are rendered from in docs/benchmarks-data/, raw hyperfine JSON under the output dir (and
the data: results.tsv, meta.tsv, mcp.md). Must run as root. About 5 minutes on 2 cores.
Analysis of the figures is hand-written: docs/performance.md.

Options:
  --quick           fewer iterations (10 runs, 20 throughput runs) for CI smoke runs; same as
                    BENCH_QUICK=1. Quick runs never rewrite the docs.
  --runs N          iterations per figure (default 60; BENCH_RUNS)
  --out DIR         raw results (default: \$BENCH_OUT or $out)
  --no-docs         do not rewrite docs/benchmarks.md, docs/benchmarks.png and docs/benchmarks-data/
  --only-mcp        only the MCP table (hack/mcpbench), printed; the docs are not rewritten
  --only-egress     only the network allowlist tables (egress, egress-rss, egress-rss-mcp) and their
                    targets, printed; the docs are not rewritten
  --render-only DIR measure nothing: print the report of the data a run saved in DIR (an output
                    dir, or docs/benchmarks-data) and render the docs from it (not from a --quick
                    or --only-egress run's data; --no-docs: print only). Needs neither root nor
                    the peers.
  -h, --help        this text
Environment: SKILLRUN (default bin/skillrun), LCFLOOR (default bin/lcfloor), BENCH_QUICK, BENCH_RUNS,
BENCH_OUT.
EOF
}

while [ $# -gt 0 ]; do
	case $1 in
	--quick) quick=1; shift ;;
	--runs) runs=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	--no-docs) write_docs=0; shift ;;
	--only-mcp) only_mcp=1; shift ;;
	--only-egress) only_egress=1 write_docs=0; shift ;;
	--render-only) render_dir=$2; shift 2 ;;
	-h | --help) usage; exit 0 ;;
	*) echo "bench: unknown argument $1 (see --help)" >&2; exit 2 ;;
	esac
done

log() { printf 'bench: %s\n' "$*" >&2; }
die() { log "$*"; exit 2; }

# write_docs_from DIR: render docs/benchmarks.md and docs/benchmarks.png from the loaded data, and
# keep that data (DIR's) in docs/benchmarks-data/ to render them again.
write_docs_from() {
	local dir=$1 data=$repo/docs/benchmarks-data f wrote=docs/benchmarks.md
	if command -v gnuplot >/dev/null; then
		report_chart "$repo/docs/benchmarks.png"
		wrote+=" and docs/benchmarks.png"
	else
		log "gnuplot missing: docs/benchmarks.png not rewritten"
	fi
	report_md >"$repo/docs/benchmarks.md"
	if [ "$(realpath "$dir")" != "$(realpath -m "$data")" ]; then
		mkdir -p "$data"
		for f in results.tsv meta.tsv mcp.md; do cp "$dir/$f" "$data/$f"; done
	fi
	log "wrote $wrote (data: docs/benchmarks-data)"
}

if [ -n "$render_dir" ]; then
	bench_load "$render_dir" || exit 2
	report_text
	if [ "$write_docs" -eq 1 ] && [ "${meta[quick]}" != 1 ] && [ "${meta[scope]}" = all ]; then
		write_docs_from "$render_dir"
	elif [ "$write_docs" -eq 1 ]; then
		log "$render_dir holds a --quick or --only-egress run's data: docs not rewritten"
	fi
	exit 0
fi

if [ "$quick" = 1 ]; then
	runs=${runs:-10} warmup=2 tp_runs=20 rss_runs=3 egress_rss_runs=1 write_docs=0
else
	runs=${runs:-60} warmup=5 tp_runs=200 rss_runs=10 egress_rss_runs=3
fi

[ "$(id -u)" -eq 0 ] || die "must run as root (containers, cgroups, tmpfs)"
"$repo/hack/install-deps.sh" bench
ensure_cgroup_v1

# --- work area on a tmpfs: bundle, state roots, skill -------------------------------------------
work=$(mktemp -d "${TMPDIR:-/tmp}/skillrun-bench.XXXXXX")
# 0755: the bundle `skill bundle` makes maps the container user to an unprivileged host uid that
# must traverse this directory.
mount -t tmpfs -o size=512m,mode=0755 skillrun-bench "$work"
cleanup() {
	local r id
	for r in "${!rt_path[@]}"; do
		for id in $("${rt_path[$r]}" --root "$work/state/$r" list -q 2>/dev/null || true); do
			"${rt_path[$r]}" --root "$work/state/$r" delete --force "$id" >/dev/null 2>&1 || true
		done
	done
	# lcfloor keeps libcontainer's state format; skillrun (or runc) can delete what it left.
	r=${rt_path[skillrun]:-${rt_path[runc]:-}}
	if [ -n "$r" ] && [ -d "$work/state/lcfloor" ]; then
		for id in $("$r" --root "$work/state/lcfloor" list -q 2>/dev/null || true); do
			"$r" --root "$work/state/lcfloor" delete --force "$id" >/dev/null 2>&1 || true
		done
	fi
	# Lazily unmount anything left below the work dir (deepest first), then the tmpfs itself.
	unmount_under "$work"
	rmdir "$work" 2>/dev/null || true
}
declare -A rt_path=() rt_ver=() rt_note=()
trap cleanup EXIT
mkdir -p "$work/bundle/rootfs" "$work/state" "$work/bin" "$out"
rm -f "$out"/*.json "$out"/results.tsv "$out"/meta.tsv "$out"/mcp.md
busybox_rootfs "$work/bundle/rootfs"
write_true_config "$work/bundle" /bin/true

# A binary the linker has just written (make bench builds first) sits in the page cache as the
# linker's mmap left it, in large folios: a process mapping it then counts ~5 MiB more RSS (25 vs
# 19.4 MiB for `skillrun run`, the same binary after its cache is dropped). Write the binaries
# back and drop their cached pages, so RSS (and the first runs) see them as any installed binary.
for b in "$skillrun" "$lcfloor"; do
	[ -f "$b" ] && python3 -c 'import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
os.fsync(fd)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)' "$b" || true
done

# --- peers ---------------------------------------------------------------------------------------
for r in skillrun runc crun; do
	case $r in
	skillrun) p=$skillrun ;;
	*) p=$(command -v "$r" || true) ;;
	esac
	if [ -z "$p" ] || [ ! -x "$p" ]; then
		rt_note[$r]="not available: $( [ "$r" = skillrun ] && echo "$skillrun not built (make skillrun)" || echo "not installed")"
		log "$r: ${rt_note[$r]}"
		continue
	fi
	p=$(realpath "$p")
	rt_ver[$r]=$(runtime_version "$r" "$p")
	mkdir -p "$work/state/$r"
	if ! err=$(timeout 30 "$p" --root "$work/state/$r" run --bundle "$work/bundle" "smoke-$r" </dev/null 2>&1 >/dev/null); then
		"$p" --root "$work/state/$r" delete --force "smoke-$r" >/dev/null 2>&1 || true
		rt_note[$r]="not available: cannot run a /bin/true container here: $(tail -n 2 <<<"$err" | tr '\n' ' ' | cut -c1-200)"
		log "$r: ${rt_note[$r]}"
		continue
	fi
	rt_path[$r]=$p
done
[ -n "${rt_path[runc]:-}" ] || die "runc must run here (it is the baseline)"
# lcfloor takes STATE-ROOT BUNDLE ID (no runc CLI); it is a measuring stick, not a peer runtime.
lc_ok=0 lc_note=
if [ ! -x "$lcfloor" ]; then
	lc_note="not available: $lcfloor not built (make lcfloor)"
elif ! err=$(timeout 30 "$lcfloor" "$work/state/lcfloor" "$work/bundle" smoke-lcfloor </dev/null 2>&1 >/dev/null); then
	lc_note="not available: $(tail -n 2 <<<"$err" | tr '\n' ' ' | cut -c1-200)"
else
	lc_ok=1
fi
if [ -n "$lc_note" ]; then log "lcfloor: $lc_note"; fi
ref=skillrun
[ -n "${rt_path[skillrun]:-}" ] || ref=runc
peers=()
for r in skillrun runc crun; do [ -n "${rt_path[$r]:-}" ] && peers+=("$r"); done

# --- measurement helpers -------------------------------------------------------------------------
tsv=$out/results.tsv
: >"$tsv"

# row SCENARIO PEER N MIN MEDIAN P95 UNIT NOTE: one result line (times in ms).
row() { printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >>"$tsv"; }

# Measuring in rounds: the commands of one scenario take turns, `rounds` rounds of runs/rounds
# iterations each, so that a shared machine's drift (other tenants, CPU boost) spreads over every
# peer instead of favouring whichever ran in the quiet minute. `hf` registers a command,
# `measure` runs the scenario's commands and records each one's min/median/p95 over all rounds.
declare -A c_peers=() c_cmd=() c_prep=()
rounds=$(( runs >= 30 ? 6 : 2 ))

# hf SCENARIO PEER [--prepare SCRIPT] -- CMD...: register CMD as PEER's command in SCENARIO.
hf() {
	local scenario=$1 peer=$2
	shift 2
	c_prep[$scenario/$peer]=
	if [ "$1" = --prepare ]; then
		c_prep[$scenario/$peer]=$2
		shift 2
	fi
	[ "$1" = -- ] && shift
	c_cmd[$scenario/$peer]=$(printf '%q ' "$@")
	c_peers[$scenario]+=" $peer"
}

# measure SCENARIO [SCALE]: run its registered commands in rounds (warm-up in the first), record
# rows; SCALE (default 1) times as many rounds, of the same size.
measure() {
	local scenario=$1 scale=${2:-1} peer r n per json prep failed=" "
	per=$(( (runs + rounds - 1) / rounds ))
	for ((r = 1; r <= rounds * scale; r++)); do
		for peer in ${c_peers[$scenario]:-}; do
			[[ $failed == *" $peer "* ]] && continue
			json=$out/$scenario-$peer.r$r.json
			prep=()
			[ -n "${c_prep[$scenario/$peer]}" ] && prep=(--prepare "${c_prep[$scenario/$peer]}")
			[ "$r" = 1 ] && log "$scenario / $peer: ${c_cmd[$scenario/$peer]}"
			if ! hyperfine -N --style none --warmup "$([ "$r" = 1 ] && echo "$warmup" || echo 1)" --runs "$per" \
				"${prep[@]}" --export-json "$json" --command-name "$peer" -- "${c_cmd[$scenario/$peer]}" \
				>/dev/null 2>"$out/$scenario-$peer.err"; then
				row "$scenario" "$peer" 0 - - - ms "failed: $(tail -n 2 "$out/$scenario-$peer.err" | tr '\n' ' ' | cut -c1-160)"
				failed+="$peer "
			fi
		done
	done
	for peer in ${c_peers[$scenario]:-}; do
		[[ $failed == *" $peer "* ]] && continue
		# All rounds' times together; p95: nearest rank, the ceil(0.95 n)-th smallest.
		jq -rs --arg s "$scenario" --arg p "$peer" 'def ms: . * 100000 | round / 100;
			[.[].results[0].times[]] | sort | length as $n |
			[$s, $p, $n, (.[0] | ms), (if $n % 2 == 1 then .[($n - 1) / 2] else (.[$n / 2 - 1] + .[$n / 2]) / 2 end | ms),
			 (.[((0.95 * $n) | ceil) - 1] | ms), "ms", ""] | map(tostring) | join("\t")' "$out/$scenario-$peer".r*.json >>"$tsv"
	done
}

# script NAME BODY: an executable sh script for hyperfine's --prepare (runs without a shell).
script() {
	printf '#!/bin/sh\n%s\n' "$2" >"$work/bin/$1"
	chmod +x "$work/bin/$1"
	echo "$work/bin/$1"
}

# --- 0. the runtime's own start ------------------------------------------------------------------
if [ "$only_egress" != 1 ]; then
# Process start: `RT --version`, what every verb a shim calls pays before its work (package
# initialisation, page faults of the binary). skillrun-skills (the whole program: the skill model,
# the MCP SDK, the egress server) and skillrun-openshell (the same with gRPC and the image stack)
# show what the split saves.
for r in "${peers[@]}"; do
	hf proc "$r" -- "${rt_path[$r]}" --version
done
for c in skills openshell; do
	if [ -n "${rt_path[skillrun]:-}" ] && [ -x "${rt_path[skillrun]}-$c" ]; then
		hf proc "skillrun-$c" -- "${rt_path[skillrun]}-$c" --version
	fi
done
# Five times the other rows' rounds: a start costs ~4 ms, and the target is a difference of a few
# percent. On this VM three interleaved sets of 100 runs gave skillrun medians of 2.8-4.0 ms (runc
# 3.4-4.0): the machine drifts by more than the difference between minutes, so the rows take turns
# 30 times, not 6.
measure proc 5

# The container's init up to libcontainer's: `BINARY init` re-executed by libcontainer runs every
# package initialisation of its binary before libcontainer's init starts. Outside a container
# (no sync pipe: it stops right after) with GODEBUG=inittrace=1, the clock of libcontainer's own
# package init line is that time, for skillrun and for lcfloor (libcontainer plus nothing).
# init_prelude PEER=BINARY...: runs x 5 iterations of each, the peers taking turns (a drifting
# machine favours none), recorded in ms. Five times the other rows' count: a run costs ~5 ms, and
# the clock is mostly the Go runtime's own start (0.45-2.3 ms before the first package init on
# this VM): five blocks of 60 runs gave medians of 2.35-2.8 ms for lcfloor (300 runs: 2.6), more
# than the target's 0.3 ms margin apart.
init_prelude() {
	local pb peer bin i
	for pb in "$@"; do : >"$out/init-${pb%%=*}.txt"; done
	for ((i = 0; i < runs * 5; i++)); do
		for pb in "$@"; do
			peer=${pb%%=*} bin=${pb#*=}
			GODEBUG=inittrace=1 "$bin" init </dev/null 2>&1 >/dev/null |
				awk '$1 == "init" && $2 == "github.com/opencontainers/runc/libcontainer" {sub("@", "", $3); print $3; exit}' >>"$out/init-$peer.txt" || true
		done
	done
	for pb in "$@"; do
		peer=${pb%%=*}
		sort -n "$out/init-$peer.txt" | awk -v p="$peer" '{v[NR] = $1} END {
			if (NR == 0) {printf "init\t%s\t0\t-\t-\t-\tms\tfailed: no inittrace line of libcontainer\n", p; exit}
			m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
			k = int(0.95 * NR); if (k < 0.95 * NR) k++
			printf "init\t%s\t%d\t%.2f\t%.2f\t%.2f\tms\t\n", p, NR, v[1], m, v[k]}' >>"$tsv"
	done
}
inits=()
[ -n "${rt_path[skillrun]:-}" ] && inits+=("skillrun=${rt_path[skillrun]}")
# The init of a skill's sandbox: skillrun-skills runs it (libcontainer re-executes its caller).
[ -n "${rt_path[skillrun]:-}" ] && [ -x "${rt_path[skillrun]}-skills" ] && inits+=("skillrun-skills=${rt_path[skillrun]}-skills")
if [ "$lc_ok" = 1 ]; then inits+=("lcfloor=$lcfloor"); else row init lcfloor 0 - - - ms "$lc_note"; fi
[ "${#inits[@]}" -eq 0 ] || init_prelude "${inits[@]}"
fi # only_egress

# --- 1. cold run ---------------------------------------------------------------------------------
if [ "$only_egress" != 1 ]; then
hf cold floor -- /bin/true
for r in "${peers[@]}"; do
	hf cold "$r" -- "${rt_path[$r]}" --root "$work/state/$r" run --bundle "$work/bundle" "cold-$r"
done
if [ "$lc_ok" = 1 ]; then
	hf cold lcfloor -- "$lcfloor" "$work/state/lcfloor" "$work/bundle" cold-lcfloor
else
	row cold lcfloor 0 - - - ms "$lc_note"
fi
# 5 times the rounds, as process start: the medians of one round's 10 runs spread by 16-24 ms on
# this VM (a bench run's skillrun/runc ratio read 0.84x, 0.85x and 0.98x), where the target is 5%.
measure cold 5

# --- 2. create, then start of a pre-created container --------------------------------------------
for r in "${peers[@]}"; do
	p=${rt_path[$r]} st=$work/state/$r
	del=$(printf '%q --root %q delete --force %q >/dev/null 2>&1; true' "$p" "$st" "cs-$r")
	hf create "$r" --prepare "$(script "prep-create-$r" "$del")" -- \
		"$p" --root "$st" create --bundle "$work/bundle" "cs-$r"
	hf start "$r" --prepare "$(script "prep-start-$r" "$del
$(printf '%q --root %q create --bundle %q %q </dev/null >/dev/null 2>&1' "$p" "$st" "$work/bundle" "cs-$r")")" -- \
		"$p" --root "$st" start "cs-$r"
done
measure create
measure start
for r in "${peers[@]}"; do
	"${rt_path[$r]}" --root "$work/state/$r" delete --force "cs-$r" >/dev/null 2>&1 || true
done
fi # only_egress

# --- 3. hello-world Python skill ------------------------------------------------------------------
skill=$work/skills/hello
mkdir -p "$skill/scripts"
cat >"$skill/SKILL.md" <<'EOF'
---
name: hello
description: Prints a JSON greeting. Benchmark fixture generated by hack/bench.sh.
---
# hello

Reads its input (stdin, to its end), then prints `{"hello":"world"}`.
EOF
cat >"$skill/scripts/main.py" <<'EOF'
import json
import sys

sys.stdin.read()
print(json.dumps({"hello": "world"}, separators=(",", ":")))
EOF
skill_ok=0 bundle_ok=0
if [ "$only_egress" = 1 ]; then
	# The egress table needs a skill run that works, nothing else of this section.
	if [ -n "${rt_path[skillrun]:-}" ] && "$skillrun" --root "$work/state/skillrun" skill run "$skill" </dev/null >/dev/null 2>&1; then
		skill_ok=1
	fi
else
# --- MCP server (hack/mcpbench: over stdio, the SDK's client and a raw one) ---------------------------
mcp_md=$out/mcp.md
(cd "$repo" && go build -o "$work/bin/mcpbench" ./hack/mcpbench) || die "build hack/mcpbench"
"$work/bin/mcpbench" -skillrun "$skillrun" -skill "$skill" -root "$work/mcp" -n "$runs" >"$mcp_md" ||
	die "hack/mcpbench failed"
if [ "$only_mcp" = 1 ]; then
	cat "$mcp_md"
	exit 0
fi
hf skill python3 -- /usr/bin/python3 "$skill/scripts/main.py"
hf skill bwrap -- bwrap --unshare-user --unshare-pid --unshare-ipc --unshare-uts --unshare-net \
	--ro-bind /usr /usr --ro-bind /lib /lib --ro-bind /lib64 /lib64 --ro-bind /bin /bin \
	--ro-bind "$skill" /skill --tmpfs /tmp --proc /proc --dev /dev --die-with-parent --clearenv \
	--setenv PATH /usr/bin:/bin --chdir /skill /usr/bin/python3 /skill/scripts/main.py
if [ -n "${rt_path[skillrun]:-}" ]; then
	if err=$("$skillrun" --root "$work/state/skillrun" skill run "$skill" </dev/null 2>&1); then
		skill_ok=1
		hf skill skillrun -- "$skillrun" --root "$work/state/skillrun" skill run "$skill"
		# The same script as a command: in the skill's sandbox (skill exec), and in a sandbox
		# without a skill on a workspace holding a copy of it (sandbox).
		hf skill skillrun-exec -- "$skillrun" --root "$work/state/skillrun" skill exec "$skill" -- python3 scripts/main.py
		sbws=$work/sandbox-ws
		mkdir -p "$sbws" && cp "$skill/scripts/main.py" "$sbws/main.py"
		[ "$(id -u)" -eq 0 ] && chown -R 65534:65534 "$sbws"
		hf skill sandbox -- "$skillrun" --root "$work/state/skillrun" sandbox --workspace "$sbws" -- python3 main.py
	else
		row skill skillrun 0 - - - ms "not available: skill run failed: $(tail -n 2 <<<"$err" | tr '\n' ' ' | cut -c1-160)"
	fi
	# Flags first: urfave/cli stops parsing flags at the first argument, so `bundle DIR -o B` fails.
	if err=$("$skillrun" skill bundle -o "$work/skill-bundle" "$skill" 2>&1); then
		bundle_ok=1
	else
		note="not available: skill bundle failed: $(tail -n 2 <<<"$err" | tr '\n' ' ' | cut -c1-160)"
		row skill runc 0 - - - ms "$note"
		row skill skillrun-run 0 - - - ms "$note"
	fi
else
	row skill skillrun 0 - - - ms "${rt_note[skillrun]}"
	row skill runc 0 - - - ms "not available: needs \`skillrun skill bundle\`"
fi
if [ "$bundle_ok" = 1 ]; then
	for r in runc skillrun; do
		name=$r
		[ "$r" = skillrun ] && name="skillrun-run"
		if err=$("${rt_path[$r]}" --root "$work/state/$r" run --bundle "$work/skill-bundle" "skill-$r" </dev/null 2>&1); then
			hf skill "$name" -- "${rt_path[$r]}" --root "$work/state/$r" run --bundle "$work/skill-bundle" "skill-$r"
		else
			row skill "$name" 0 - - - ms "failed on the generated bundle: $(tail -n 2 <<<"$err" | tr '\n' ' ' | cut -c1-160)"
		fi
	done
	if [ "$lc_ok" != 1 ]; then
		row skill lcfloor 0 - - - ms "$lc_note"
	elif err=$("$lcfloor" "$work/state/lcfloor" "$work/skill-bundle" skill-lcfloor </dev/null 2>&1 >/dev/null); then
		hf skill lcfloor -- "$lcfloor" "$work/state/lcfloor" "$work/skill-bundle" skill-lcfloor
	else
		row skill lcfloor 0 - - - ms "failed on the generated bundle: $(tail -n 2 <<<"$err" | tr '\n' ' ' | cut -c1-160)"
	fi
fi
measure skill
fi # only_egress

# --- 3b. network allowlist (egress) --------------------------------------------------------------
# The same hello skill with the allowlist (hook, sockets handed over, egress server) but no
# connection, against none; and a skill making 100 sequential HTTP requests, or fetching 64 MiB,
# from a loopback server through the allowlist vs directly with --network=host.
if [ "$skill_ok" = 1 ]; then
	www=$work/www
	mkdir -p "$www"
	head -c $((64 << 20)) /dev/zero >"$www/64m"
	echo ok >"$www/small"
	eport=$(free_port)
	python3 -m http.server --bind 127.0.0.1 --directory "$www" "$eport" >/dev/null 2>&1 &
	www_pid=$!
	wait_port "$eport" || true
	net=$work/skills/net
	mkdir -p "$net/scripts"
	printf -- '---\nname: net\ndescription: HTTP GETs against a benchmark server. Fixture generated by hack/bench.sh.\n---\n# net\n' >"$net/SKILL.md"
	printf 'network:\n  hosts: ["bench.test:%s"]\nlimits:\n  timeout: 60s\n' "$eport" >"$net/sandbox.yaml"
	cat >"$net/scripts/main.py" <<'EOF'
import http.client, json, socket, sys
req = json.load(sys.stdin)
# One lookup (none without requests: the no-network twin has no DNS), so
# the loop measures connections.
addr = socket.gethostbyname(req["host"]) if req.get("n") else None
n = 0
for _ in range(req.get("n", 0)):
    c = http.client.HTTPConnection(addr, req["port"], timeout=30)
    c.request("GET", req["path"], headers={"Host": "bench.test:%d" % req["port"]})
    n += len(c.getresponse().read())
    c.close()
print(json.dumps({"bytes": n}))
EOF
	g=(--allow-host "bench.test:$eport" --resolve "bench.test:$eport:127.0.0.1")
	einput() { printf '{"host": "%s", "port": %s, "path": "%s", "n": %s}' "$1" "${4:-$eport}" "$2" "$3"; }
	# The floor of any user-space relay: the same transfers with --network host through a plain
	# TCP forwarder (hack/hopfloor) on the host, so the targets read against what one hop costs here.
	fport=
	if (cd "$repo" && go build -o "$work/bin/hopfloor" ./hack/hopfloor); then
		coproc HOPFLOOR { exec "$work/bin/hopfloor" -lifetime 30m "127.0.0.1:$eport"; }
		read -r -t 10 fport <&"${HOPFLOOR[0]}" || fport=
	fi
	if err=$("$skillrun" --root "$work/state/skillrun" skill run "${g[@]}" --input "$(einput bench.test /small 1)" "$net" 2>&1 </dev/null); then
		# The same script without network: what the allowlist adds.
		net0=$work/skills/net0
		mkdir -p "$net0/scripts"
		sed 's/^name: net$/name: net0/' "$net/SKILL.md" >"$net0/SKILL.md" && cp "$net/scripts/main.py" "$net0/scripts/"
		printf 'limits:\n  timeout: 60s\n' >"$net0/sandbox.yaml"
		hf egress none -- "$skillrun" --root "$work/state/skillrun" skill run --input "$(einput bench.test /small 0)" "$net0"
		hf egress allowlist -- "$skillrun" --root "$work/state/skillrun" skill run "${g[@]}" --input "$(einput bench.test /small 0)" "$net"
		hf egress allow-100req -- "$skillrun" --root "$work/state/skillrun" skill run "${g[@]}" --input "$(einput bench.test /small 100)" "$net"
		hf egress host-100req -- "$skillrun" --root "$work/state/skillrun" skill run --network host --input "$(einput 127.0.0.1 /small 100)" "$net"
		hf egress allow-64MiB -- "$skillrun" --root "$work/state/skillrun" skill run "${g[@]}" --input "$(einput bench.test /64m 1)" "$net"
		hf egress host-64MiB -- "$skillrun" --root "$work/state/skillrun" skill run --network host --input "$(einput 127.0.0.1 /64m 1)" "$net"
		if [ -n "$fport" ]; then
			hf egress floor-100req -- "$skillrun" --root "$work/state/skillrun" skill run --network host --input "$(einput 127.0.0.1 /small 100 "$fport")" "$net"
			hf egress floor-64MiB -- "$skillrun" --root "$work/state/skillrun" skill run --network host --input "$(einput 127.0.0.1 /64m 1 "$fport")" "$net"
		fi
		measure egress
	# --- egress memory: `skill run`'s own peak RSS (VmHWM of the runner, sampled from /proc)
	# idle (two requests) and under the attacks of tests/security's TestEgressFlood, which the
	# bounds of egress/limits.go keep flat (target: < 64 MiB above idle). The origins: a
	# keep-alive HTTP/1.1 server and one that holds every connection without answering.
	kport=$(free_port)
	python3 -m http.server --protocol HTTP/1.1 --bind 127.0.0.1 --directory "$www" "$kport" >/dev/null 2>&1 &
	keep_pid=$!
	hport=$(free_port)
	python3 -c 'import socket, sys
s = socket.create_server(("127.0.0.1", int(sys.argv[1])), backlog=4096)
held = []
while True:
    held.append(s.accept()[0])' "$hport" >/dev/null 2>&1 &
	hold_pid=$!
	wait_port "$kport" || true
	wait_port "$hport" || true
	flood=$work/skills/flood
	mkdir -p "$flood/scripts"
	printf -- '---\nname: flood\ndescription: Floods the network allowlist (huge heads, trickled heads, held connections). Fixture generated by hack/bench.sh.\n---\n# flood\n' >"$flood/SKILL.md"
	printf 'network:\n  hosts: ["bench.test:%s", "bench.test:%s"]\nlimits:\n  memory: 1Gi\n  pids: 128\n  timeout: 60s\n' "$kport" "$hport" >"$flood/sandbox.yaml"
	cat >"$flood/scripts/main.py" <<'EOF'
import json, os, socket, sys, threading, time
req = json.load(sys.stdin)
P, H = req["port"], req["hold"]
HP = "bench.test:%d" % P
ADDR = socket.gethostbyname("bench.test")
out = {}
def conn(via):
    if via == "direct":
        return socket.create_connection((ADDR, P), timeout=30)
    return socket.create_connection(("127.0.0.1", 3128), timeout=30)
def target(via, path):
    return path if via == "direct" else "http://%s%s" % (HP, path)
def response(s):
    f = s.makefile("rb")
    status = f.readline().decode("latin-1").strip()
    n = 0
    while True:
        h = f.readline()
        if h in (b"\r\n", b"\n", b""):
            break
        if h.lower().startswith(b"content-length:"):
            n = int(h.split(b":")[1])
    f.read(n)
    return status or "closed"
def send_big(s, prefix, n):
    chunk = b"a" * (1 << 20)
    try:
        s.sendall(prefix)
        for _ in range(n >> 20):
            s.sendall(chunk)
        s.sendall(b"\r\n\r\n")
        return response(s)
    except OSError as e:
        return e.strerror
def second(via, how):
    s = conn(via)
    s.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target(via, "/small"), HP)).encode())
    first = response(s)
    head = ("GET %s HTTP/1.1\r\nHost: %s\r\nX-Big: " % (target(via, "/small"), HP)).encode()
    if how == "big":
        return first + "; " + send_big(s, head, 160 << 20)
    try:
        for b in head + b"x\r\n\r\n":
            s.sendall(bytes([b]))
            time.sleep(11.0 / (len(head) + 5))
        return first + "; " + response(s)
    except OSError as e:
        return first + "; " + (e.strerror or str(e))
def held(nproc, per):
    pids = []
    for _ in range(nproc):
        pid = os.fork()
        if pid == 0:
            socks = []
            for _ in range(per):
                try:
                    s = socket.create_connection((ADDR, H), timeout=10)
                    s.sendall(("GET /hold HTTP/1.1\r\nHost: bench.test:%d\r\n\r\n" % H).encode())
                    socks.append(s)
                except OSError:
                    pass
            time.sleep(3)
            os._exit(0)
        pids.append(pid)
    for pid in pids:
        os.waitpid(pid, 0)
    return "held"
def run(jobs):
    ts = [threading.Thread(target=lambda k=k, f=f: out.__setitem__(k, f())) for k, f in jobs]
    for t in ts: t.start()
    for t in ts: t.join()
vias = ("direct", "proxy")
run([(via, lambda via=via: (lambda s: (s.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % (target(via, "/small"), HP)).encode()), response(s))[1])(conn(via))) for via in vias])
a = req["attack"]
if a == "host-headers":
    run([("%s %d" % (v, i), lambda v=v, i=i: send_big(conn(v), ("GET %s HTTP/1.1\r\nHost: " % target(v, "/small")).encode(), 16 << 20)) for v in vias for i in range(2)])
elif a == "second-header":
    run([(v, lambda v=v: second(v, "big")) for v in vias])
elif a == "trickle":
    run([(v, lambda v=v: second(v, "trickle")) for v in vias])
elif a == "held":
    out["held"] = held(4, 1000)
print(json.dumps(out))
EOF
	# peak_hwm CMD...: run CMD (stdin /dev/null) and print its peak RSS (VmHWM, KiB), sampled
	# every 20 ms from /proc while it runs; the largest sample (VmHWM can read a little lower later:
	# the kernel records it lazily, and memory returned with madvise lowers the RSS it falls back on).
	peak_hwm() {
		"$@" </dev/null >/dev/null 2>&1 &
		local pid=$! max=0 v
		while kill -0 "$pid" 2>/dev/null; do
			v=$(awk '/^VmHWM:/ {print $2}' "/proc/$pid/status" 2>/dev/null || true)
			if [ -n "$v" ] && [ "$v" -gt "$max" ]; then max=$v; fi
			sleep 0.02
		done
		wait "$pid" || true
		echo "$max"
	}
	fg=(--allow-host "bench.test:$kport" --resolve "bench.test:$kport:127.0.0.1" --allow-host "bench.test:$hport" --resolve "bench.test:$hport:127.0.0.1")
	# rss_row SCENARIO ATTACK FILE: min / median / max of FILE's KiB, in MiB; the note: the median
	# above idle's (rss_idle, which the idle row sets).
	rss_row() {
		sort -n "$3" | awk -v s="$1" -v p="$2" -v idle="${rss_idle:-}" '$1 > 0 {v[++n] = $1} END {
			if (n == 0) {printf "%s\t%s\t0\t-\t-\t-\tMiB\tfailed: no VmHWM read\n", s, p; exit}
			m = v[int((n + 1) / 2)]
			note = (p == "idle" || idle == "") ? "" : sprintf("%+.1f MiB over idle", (m - idle) / 1024)
			printf "%s\t%s\t%d\t%.1f\t%.1f\t%.1f\tMiB\t%s\n", s, p, n, v[1] / 1024, m / 1024, v[n] / 1024, note}' >>"$tsv"
		if [ "$2" = idle ]; then
			rss_idle=$(sort -n "$3" | awk '$1 > 0 {v[++n] = $1} END {if (n) print v[int((n + 1) / 2)]}')
		fi
	}
	attacks=(idle host-headers second-header trickle held)
	rss_idle=
	for attack in "${attacks[@]}"; do
		f=$out/egress-rss-$attack.txt
		: >"$f"
		log "egress-rss / $attack: $egress_rss_runs runs"
		for ((i = 0; i < egress_rss_runs; i++)); do
			peak_hwm "$skillrun" --root "$work/state/skillrun" skill run "${fg[@]}" \
				--input "{\"attack\": \"$attack\", \"port\": $kport, \"hold\": $hport}" "$flood" >>"$f"
		done
		rss_row egress-rss "$attack" "$f"
	done
	# The same attacks through one long-lived `mcp serve` (stdio) per run, one tools/call each,
	# idle first: its VmHWM after each call, the largest reading so far (the peak of its life so far).
	for attack in "${attacks[@]}"; do : >"$out/egress-rss-mcp-$attack.txt"; done
	log "egress-rss-mcp: $egress_rss_runs mcp serve sessions"
	for ((i = 0; i < egress_rss_runs; i++)); do
		python3 - "$kport" "$hport" "${attacks[@]}" -- "$skillrun" --root "$work/state/skillrun" mcp serve \
			--no-commands --skills "$flood" "${fg[@]}" <<'EOF' 2>>"$out/egress-rss-mcp.err" >"$out/egress-rss-mcp.out" || true
import json, subprocess, sys
sep = sys.argv.index("--")
port, hold, attacks = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:sep]
srv = subprocess.Popen(sys.argv[sep + 1:], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
def send(m):
    srv.stdin.write(json.dumps(dict(m, jsonrpc="2.0")) + "\n")
    srv.stdin.flush()
def call(i, method, params):
    send({"id": i, "method": method, "params": params})
    while True:
        r = json.loads(srv.stdout.readline())
        if r.get("id") == i:
            return r
call(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}})
send({"method": "notifications/initialized"})
peak = 0
for n, a in enumerate(attacks, 2):
    r = call(n, "tools/call", {"name": "flood", "arguments": {"attack": a, "port": port, "hold": hold}})
    ok = "result" in r and not r["result"].get("isError")
    peak = max(peak, next(int(l.split()[1]) for l in open("/proc/%d/status" % srv.pid) if l.startswith("VmHWM:")))
    print(a, peak if ok else 0, flush=True)
srv.stdin.close()
srv.wait()
EOF
		while read -r attack v; do echo "$v" >>"$out/egress-rss-mcp-$attack.txt"; done <"$out/egress-rss-mcp.out"
	done
	rss_idle=
	for attack in "${attacks[@]}"; do
		rss_row egress-rss-mcp "$attack" "$out/egress-rss-mcp-$attack.txt"
	done
	kill "$keep_pid" "$hold_pid" 2>/dev/null
	else
		row egress allowlist 0 - - - ms "not available: $(tail -n 2 <<<"$err" | tr '\n' ' ' | cut -c1-160)"
	fi
	kill "$www_pid" 2>/dev/null
	[ -z "${HOPFLOOR_PID:-}" ] || kill "$HOPFLOOR_PID" 2>/dev/null
fi

if [ "$only_egress" != 1 ]; then
# --- 3c. dependency environments --------------------------------------------------------------
# The same hello script as a skill with a prepared environment (one package from a loopback
# PEP 503 index of a wheel built here) and as a skill without dependencies: what mounting and
# using the environment adds to a run. The build itself is done once, before timing.
if [ "$skill_ok" = 1 ]; then
	pix=$work/pyindex
	mkdir -p "$pix/simple/benchpkg"
	python3 - "$pix/simple/benchpkg" <<'EOF'
import base64, hashlib, sys, zipfile
files = {"benchpkg/__init__.py": "VALUE = 1\n",
         "benchpkg-1.0.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: benchpkg\nVersion: 1.0.0\n",
         "benchpkg-1.0.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: bench\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
rec = ["%s,sha256=%s,%d" % (k, base64.urlsafe_b64encode(hashlib.sha256(v.encode()).digest()).rstrip(b"=").decode(), len(v)) for k, v in files.items()]
files["benchpkg-1.0.0.dist-info/RECORD"] = "\n".join(rec + ["benchpkg-1.0.0.dist-info/RECORD,,"]) + "\n"
with zipfile.ZipFile(sys.argv[1] + "/benchpkg-1.0.0-py3-none-any.whl", "w") as z:
    for k, v in files.items():
        z.writestr(k, v)
EOF
	pport=$(free_port)
	python3 -m http.server --bind 127.0.0.1 --directory "$pix" "$pport" >/dev/null 2>&1 &
	pix_pid=$!
	wait_port "$pport" || true
	for d in deps deps0; do
		mkdir -p "$work/skills/$d"
		printf -- '---\nname: %s\ndescription: hello with or without a package environment. Fixture generated by hack/bench.sh.\n---\n# %s\n' "$d" "$d" >"$work/skills/$d/SKILL.md"
		printf 'try:\n    import benchpkg\nexcept ImportError:\n    pass\nprint("{\\"hello\\": 1}")\n' >"$work/skills/$d/main.py"
	done
	echo "benchpkg==1.0.0" >"$work/skills/deps/requirements.txt"
	dcache=$work/envcache
	if err=$("$skillrun" --root "$work/state/skillrun" skill prepare --env-cache "$dcache" --pip-index-url "http://127.0.0.1:$pport/simple/" "$work/skills/deps" 2>&1 </dev/null); then
		hf deps none -- "$skillrun" --root "$work/state/skillrun" skill run --env-cache "$dcache" --input '{}' "$work/skills/deps0"
		hf deps prepared -- "$skillrun" --root "$work/state/skillrun" skill run --env-cache "$dcache" --no-prepare --input '{}' "$work/skills/deps"
		hf deps exec -- "$skillrun" --root "$work/state/skillrun" skill exec --env-cache "$dcache" --no-prepare "$work/skills/deps" -- python3 main.py
		measure deps
	else
		row deps prepared 0 - - - ms "not available: $(tail -n 2 <<<"$err" | tr '\n' ' ' | cut -c1-160)"
	fi
	kill "$pix_pid" 2>/dev/null
fi

# --- 4. throughput: cold runs at concurrency 2 ------------------------------------------------------
# tp_batch PEER ROUND CMD...: run CMD with a unique trailing container ID tp_batch_runs times, 2 at a
# time; appends "RUNS WALL-NS CPU-S RC" to $out/throughput-PEER.txt. CPU is GNU time's user + system
# of xargs and every process it waited for: the runtimes, and the containers they reaped.
tp_batch() {
	local peer=$1 round=$2 t0 t1 rc=0 cpu
	shift 2
	t0=$(date +%s%N)
	# xargs gives the commands /dev/null as stdin.
	seq "$tp_batch_runs" | sed "s/^/$round-/" | /usr/bin/time -f '%U %S' -o "$out/throughput-$peer.cpu" \
		xargs -P 2 -I '{}' "$@" >/dev/null 2>>"$out/throughput-$peer.err" || rc=$?
	t1=$(date +%s%N)
	cpu=$(awk 'NF == 2 && $1 ~ /^[0-9.]+$/ {print $1 + $2}' "$out/throughput-$peer.cpu" | tail -n 1)
	echo "$tp_batch_runs $((t1 - t0)) ${cpu:--} $rc" >>"$out/throughput-$peer.txt"
}
# The peers take turns in rounds of tp_batch_runs, in a shuffled order each round, so a machine
# whose speed drifts during the minutes this takes favours none of them. Each round's rate and CPU
# per container are kept: the rows give the whole (runs/s over all rounds, CPU over all runs) as the
# median column and the slowest and fastest round as min and max.
# Ten rounds per peer, of 20 runs (of 2 in a quick run): on this VM one peer's rounds spread over
# 29-37 ms of CPU per container, and five rounds left the comparison with lcfloor's (a 3 ms target)
# to that spread: 4.9 ms apart in one make bench, 2.0-2.4 in 10-12 rounds by hand.
tp_batch_runs=$(((tp_runs + 9) / 10))
tp_rounds=$(((tp_runs + tp_batch_runs - 1) / tp_batch_runs))
declare -A tp_cmd=([floor]="/bin/true")
tp_peers=(floor)
for r in "${peers[@]}"; do
	tp_cmd[$r]="${rt_path[$r]} --root $work/state/$r run --bundle $work/bundle tp-$r-{}"
	tp_peers+=("$r")
done
if [ "$lc_ok" = 1 ]; then
	tp_cmd[lcfloor]="$lcfloor $work/state/lcfloor $work/bundle tp-lcfloor-{}"
	tp_peers+=(lcfloor)
fi
for p in "${tp_peers[@]}"; do : >"$out/throughput-$p.txt"; done
log "throughput: ${tp_peers[*]}: $tp_rounds rounds of $tp_batch_runs runs at concurrency 2, taking turns"
for ((round = 1; round <= tp_rounds; round++)); do
	for p in $(printf '%s\n' "${tp_peers[@]}" | shuf); do
		# The commands are word lists without quoting needs: paths under $work and fixed words.
		# shellcheck disable=SC2086
		tp_batch "$p" "$round" ${tp_cmd[$p]}
	done
done
for p in "${tp_peers[@]}"; do
	awk -v p="$p" '$3 != "-" {n += $1; ns += $2; c += $3; r = $1 / ($2 / 1e9); k = 1000 * $3 / $1
		if (!m++ || r < rmin) rmin = r; if (r > rmax) rmax = r
		if (m == 1 || k < kmin) kmin = k; if (k > kmax) kmax = k
		if ($4 != 0) bad++}
		END {
		if (n == 0) {printf "throughput\t%s\t0\t-\t-\t-\truns/s\tfailed: no round finished\n", p; exit}
		note = bad ? bad " round(s) had failed runs (xargs exit status != 0)" : ""
		printf "throughput\t%s\t%d\t%.1f\t%.1f\t%.1f\truns/s\t%s\n", p, n, rmin, n / (ns / 1e9), rmax, note
		printf "cpu\t%s\t%d\t%.1f\t%.1f\t%.1f\tms\t\n", p, n, kmin, 1000 * c / n, kmax}' "$out/throughput-$p.txt" >>"$tsv"
done

# --- 5. peak RSS and binary size ------------------------------------------------------------------
# rss PEER CMD...: max and median of GNU time's %M (KiB) over rss_runs runs, recorded in MiB.
rss() {
	local peer=$1 i f=$out/rss-$1.txt
	shift
	: >"$f"
	for ((i = 0; i < rss_runs; i++)); do
		/usr/bin/time -f %M -a -o "$f" "$@" </dev/null >/dev/null 2>&1 || true
	done
	sort -n "$f" | awk -v p="$peer" '{v[NR] = $1} END {
		if (NR == 0) exit
		printf "rss\t%s\t%d\t%.1f\t%.1f\t%.1f\tMiB\t\n", p, NR, v[1] / 1024, v[int((NR + 1) / 2)] / 1024, v[NR] / 1024}' >>"$tsv"
}
for r in "${peers[@]}"; do
	rss "$r" "${rt_path[$r]}" --root "$work/state/$r" run --bundle "$work/bundle" "rss-$r"
done
[ "$skill_ok" = 1 ] && rss skillrun-skill "$skillrun" --root "$work/state/skillrun" skill run "$skill"
rss bwrap bwrap --unshare-user --unshare-pid --unshare-net --ro-bind /usr /usr --symlink usr/lib64 /lib64 \
	--symlink usr/lib /lib --symlink usr/bin /bin --proc /proc --dev /dev --die-with-parent /bin/true
sizes=()
for r in "${peers[@]}"; do sizes+=("$r=${rt_path[$r]}"); done
for c in skills openshell; do
	[ -n "${rt_path[skillrun]:-}" ] && [ -x "${rt_path[skillrun]}-$c" ] && sizes+=("skillrun-$c=${rt_path[skillrun]}-$c")
done
for rp in "${sizes[@]}"; do
	r=${rp%%=*} p=${rp#*=}
	size=$(stat -c %s "$p")
	link=$(file -b "$p" | grep -o 'statically linked\|dynamically linked' || true)
	awk -v p="$r" -v s="$size" -v l="$link" 'BEGIN {printf "size\t%s\t1\t-\t%.1f\t-\tMiB\t%s\n", p, s / 1048576, l}' >>"$tsv"
done
size=$(stat -c %s "$(command -v bwrap)")
awk -v s="$size" 'BEGIN {printf "size\tbwrap\t1\t-\t%.2f\t-\tMiB\tdynamically linked\n", s / 1048576}' >>"$tsv"

fi # only_egress

# --- report: the data, then what is rendered from it (hack/lib/bench-report.sh) ---------------------
# write_meta: what the report needs besides results.tsv, as KEY<TAB>VALUE lines in $out/meta.tsv.
write_meta() {
	local r
	{
		printf 'date\t%s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
		printf 'machine\t%s\n' "$(machine_line)"
		printf 'scope\t%s\n' "$([ "$only_egress" = 1 ] && echo egress || echo all)"
		printf 'quick\t%s\n' "$quick"
		printf 'runs\t%s\nwarmup\t%s\nrounds\t%s\ntp_runs\t%s\nref\t%s\n' "$runs" "$warmup" "$rounds" "$tp_runs" "$ref"
		for r in skillrun runc crun; do
			printf 'version.%s\t%s\nnote.%s\t%s\n' "$r" "${rt_ver[$r]:-}" "$r" "${rt_note[$r]:-}"
		done
		printf 'version.bwrap\t%s\n' "$(bwrap --version)"
		printf 'version.python3\t%s\n' "$(python3 --version 2>&1)"
		printf 'version.hyperfine\t%s\n' "$(hyperfine --version)"
	} >"$out/meta.tsv"
}
write_meta
bench_load "$out"
report_text
if [ "$write_docs" -eq 1 ]; then
	write_docs_from "$out"
fi
log "raw results in $out"
