# shellcheck shell=bash
# Renders hack/bench.sh's measurements: the text report, docs/benchmarks.md and its chart. Sourced by
# hack/bench.sh; it defines functions only, and reads nothing but a data dir:
#
#   results.tsv   one row per peer and scenario: SCENARIO PEER N MIN MEDIAN P95 UNIT NOTE
#                 (times in ms; "-" where there is no value; a failed peer has N 0 and a note)
#   meta.tsv      KEY VALUE: date, machine, scope (all / egress), quick, runs, warmup, rounds,
#                 tp_runs, ref, version.RUNTIME and note.RUNTIME (skillrun, runc, crun),
#                 version.bwrap, version.python3, version.hyperfine
#   mcp.md        hack/mcpbench's table and verdicts (scope all)
#
#   bench_load DIR        read DIR's data (sets tsv, mcp_md and the meta array)
#   report_text           the report hack/bench.sh prints, from the loaded data
#   report_md             docs/benchmarks.md, from the loaded data
#   report_chart PNG      the chart (gnuplot), from the loaded data

declare -A meta=()
tsv='' mcp_md=''

# bench_load DIR: load DIR's results.tsv, meta.tsv and mcp.md.
bench_load() {
	local dir=$1 k v
	if [ ! -f "$dir/results.tsv" ] || [ ! -f "$dir/meta.tsv" ]; then
		echo "bench: $dir has no results.tsv and meta.tsv (the data hack/bench.sh saves)" >&2
		return 2
	fi
	tsv=$dir/results.tsv mcp_md=$dir/mcp.md
	meta=()
	while IFS=$'\t' read -r k v; do
		[ -z "$k" ] || meta[$k]=$v
	done <"$dir/meta.tsv"
	for k in date machine scope quick runs warmup rounds tp_runs ref; do
		[ -n "${meta[$k]:-}" ] || { echo "bench: $dir/meta.tsv has no $k" >&2; return 2; }
	done
	if [ "${meta[scope]}" = all ] && [ ! -f "$mcp_md" ]; then
		echo "bench: $dir has no mcp.md" >&2
		return 2
	fi
}

# median SCENARIO PEER: the recorded median, or empty.
median() { awk -F'\t' -v s="$1" -v p="$2" '$1 == s && $2 == p && $5 != "-" {print $5}' "$tsv"; }
# ratio SCENARIO PEER [REFPEER]: PEER median / REF median, formatted "1.23x", or "-".
ratio() {
	local a b
	a=$(median "$1" "$2")
	b=$(median "$1" "${3:-${meta[ref]}}")
	if [ -n "$a" ] && [ -n "$b" ]; then awk -v a="$a" -v b="$b" 'BEGIN {printf "%.2fx", a / b}'; else echo -; fi
}

scen_title() {
	case $1 in
	proc) echo "process start: RT --version (ms)" ;;
	init) echo "the container's init up to libcontainer's init: BINARY init, the clock at libcontainer's package init (GODEBUG=inittrace=1; ms)" ;;
	cold) echo "cold run of /bin/true (ms)" ;;
	create) echo "create (ms)" ;;
	start) echo "start of a pre-created container (ms)" ;;
	skill) echo "hello-world Python skill (ms)" ;;
	deps) echo "dependency environment: the same hello script as a skill with a prepared one-package environment and without dependencies (ms)" ;;
	egress) echo "network allowlist: skill run with none / allowlist, 100 HTTP requests and a 64 MiB download through the allowlist vs --network host, and vs --network host through a plain TCP forwarder (hack/hopfloor, the floor of one user-space hop) (ms)" ;;
	egress-rss) echo "network allowlist under attack: skill run's own peak RSS (VmHWM from /proc; min / median / max, MiB): idle, four 16 MiB Host headers, a 160 MiB second head on a kept-alive connection, a second head trickled over 11 s, 4000 held connections" ;;
	egress-rss-mcp) echo "the same attacks through one long-lived mcp serve (stdio), a tools/call each, idle first: its peak RSS (VmHWM from /proc) after each call (min / median / max over sessions, MiB)" ;;
	throughput) echo "${meta[tp_runs]} runs at concurrency 2, the peers taking turns in rounds (runs/s: slowest round / all rounds / fastest round)" ;;
	cpu) echo "CPU time per container in those runs (user + system of the runtime and the container, ms: least round / all rounds / most round)" ;;
	rss) echo "peak RSS (MiB, GNU time %M)" ;;
	size) echo "binary size (MiB)" ;;
	esac
}

# table [SCENARIO...]: the tables of the scenarios (default: all).
table() {
	local s ref_s p list=("$@")
	[ $# -gt 0 ] || list=(proc init cold create start skill egress egress-rss egress-rss-mcp deps throughput cpu rss size)
	for s in "${list[@]}"; do
		# A scenario the data has no row of (data of an older run): no table.
		awk -F'\t' -v s="$s" '$1 == s {f = 1} END {exit !f}' "$tsv" || continue
		ref_s=${meta[ref]}
		[ "$s" = skill ] && ref_s=$([ -n "$(median skill skillrun)" ] && echo skillrun || echo "${meta[ref]}")
		[ "$s" = egress ] && ref_s=none
		[ "$s" = egress-rss ] || [ "$s" = egress-rss-mcp ] && ref_s=idle
		[ "$s" = deps ] && ref_s=none
		[ "$s" = init ] && ref_s=lcfloor
		printf '\n**%s**\n\n' "$(scen_title "$s")"
		printf '| peer | n | min | median | p95 | ratio to %s | note |\n|---|---|---|---|---|---|---|\n' "$ref_s"
		awk -F'\t' -v s="$s" '$1 == s {print $2}' "$tsv" | while read -r p; do
			awk -F'\t' -v s="$s" -v p="$p" -v r="$(ratio "$s" "$p" "$ref_s")" \
				'$1 == s && $2 == p {printf "| %s | %s | %s | %s | %s | %s | %s |\n", p, $3, $4, $5, $6, r, $8}' "$tsv"
		done
	done
}

# check_row TARGET [MEASURED MET]: one row of a targets table; "not measured" without MEASURED.
check_row() {
	if [ -z "${2:-}" ]; then
		echo "| $1 | not measured | - |"
	else
		awk -v d="$1" -v v="$2" -v ok="$3" 'BEGIN {printf "| %s | %s | %s |\n", d, v, ok ? "met" : "MISSED"}'
	fi
}

# cmp_row TARGET A B COND [NOTE]: a target row for measured A (ms) against the yardstick B (ms),
# met when the awk expression COND (of a and b) holds; "not measured" without both. A is taken
# 1e-9 lower, so that a figure equal to its bound at the printed precision meets it (in binary
# floating point, 2.80 + 0.3 < 3.10).
cmp_row() {
	if [ -n "$2" ] && [ -n "$3" ]; then
		check_row "$1 ($3 ms)" "$2 ms${5:-}" "$(awk -v a="$2" -v b="$3" "BEGIN {a -= 1e-9; print ($4)}")"
	else check_row "$1"; fi
}

# egress_targets: the allowlist's targets: added cost at create, per connection, bulk throughput
# (issue 11); the runner's memory under attack (issue 23).
egress_targets() {
	local en ea a100 h100 a64 h64 f o
	en=$(median egress none) ea=$(median egress allowlist)
	if [ -n "$en" ] && [ -n "$ea" ]; then
		o=$(awk -v a="$ea" -v b="$en" 'BEGIN {printf "%.1f", a - b}')
		check_row "allowlist: added cost of a networked skill run < 3 ms" "$o ms" "$(awk -v o="$o" 'BEGIN {print o < 3}')"
	else check_row "allowlist: added cost of a networked skill run < 3 ms"; fi
	a100=$(median egress allow-100req) h100=$(median egress host-100req)
	if [ -n "$a100" ] && [ -n "$h100" ]; then
		o=$(awk -v a="$a100" -v b="$h100" -v ea="$ea" -v en="$en" 'BEGIN {printf "%.3f", (a - b - (ea - en)) / 100}')
		f=$(median egress floor-100req)
		[ -z "$f" ] || f=$(awk -v f="$f" -v b="$h100" 'BEGIN {printf " (a plain forwarder: %.3f ms)", (f - b) / 100}')
		check_row "allowlist: per-connection overhead < 0.2 ms (100 requests, vs --network host)" "$o ms$f" "$(awk -v o="$o" 'BEGIN {print o < 0.2}')"
	else check_row "allowlist: per-connection overhead < 0.2 ms"; fi
	a64=$(median egress allow-64MiB) h64=$(median egress host-64MiB)
	if [ -n "$a64" ] && [ -n "$h64" ] && [ -n "$en" ]; then
		o=$(awk -v a="$a64" -v h="$h64" -v ea="$ea" -v en="$en" 'BEGIN {printf "%.0f%%", 100 * ((h - en) / (a - ea))}')
		f=$(median egress floor-64MiB)
		[ -z "$f" ] || f=$(awk -v f="$f" -v h="$h64" -v en="$en" 'BEGIN {printf " (a plain forwarder: %.0f%%)", 100 * ((h - en) / (f - en))}')
		check_row "allowlist: 64 MiB throughput within 10% of --network host (transfer time ratio)" "$o$f" "$(awk -v a="$a64" -v h="$h64" -v ea="$ea" -v en="$en" 'BEGIN {print ((h - en) / (a - ea) >= 0.9)}')"
	else check_row "allowlist: 64 MiB throughput within 10% of --network host"; fi
	# The runner's memory under the allowlist attacks (issue 23): the worst median above idle, of
	# skill run and of a long-lived mcp serve.
	rss_target egress-rss "skill run"
	rss_target egress-rss-mcp "mcp serve"
}

# rss_target SCENARIO WHO: the target row of an egress-rss table: the worst median above idle.
rss_target() {
	local idle worst=
	idle=$(median "$1" idle)
	if [ -n "$idle" ]; then
		worst=$(awk -F'\t' -v s="$1" -v i="$idle" '$1 == s && $2 != "idle" && $5 != "-" {d = $5 - i; if (w == "" || d > w) {w = d; p = $2}} END {if (w != "") printf "%.1f MiB (%s)", w, p}' "$tsv")
	fi
	if [ -n "$worst" ]; then
		check_row "allowlist: $2 peak RSS under attack < 64 MiB above idle ($idle MiB)" "+$worst" "$(awk -v w="${worst%% *}" 'BEGIN {print w < 64}')"
	else check_row "allowlist: $2 peak RSS under attack < 64 MiB above idle"; fi
}

# targets: overheads and the issue's targets, as a table.
targets() {
	local s_cold r_cold s_start sk py lc dn dp rs o
	s_cold=$(median cold skillrun) r_cold=$(median cold runc) s_start=$(median start skillrun)
	sk=$(median skill skillrun) py=$(median skill python3)
	echo "| target | measured | result |"
	echo "|---|---|---|"
	# The runtime's own cost (issue 26), each against its yardstick.
	cmp_row "process start (--version) median <= runc's" "$(median proc skillrun)" "$(median proc runc)" 'a <= b'
	cmp_row "container init: time to libcontainer's init <= lcfloor's + 0.3 ms" "$(median init skillrun)" "$(median init lcfloor)" 'a <= b + 0.3'
	cmp_row "skillrun cold-run median <= 0.95x runc's" "$s_cold" "$r_cold" 'a <= 0.95 * b' " ($(ratio cold skillrun runc))"
	cmp_row "CPU per container at concurrency 2 <= lcfloor's + 3 ms (runc: $(median cpu runc) ms)" "$(median cpu skillrun)" "$(median cpu lcfloor)" 'a <= b + 3'
	if [ -n "$s_start" ]; then check_row "pre-created start median < 5 ms" "$s_start ms" "$(awk -v a="$s_start" 'BEGIN {print a < 5}')"; else check_row "pre-created start median < 5 ms"; fi
	if [ -n "$sk" ]; then
		o=$(awk -v a="$sk" -v b="$py" 'BEGIN {printf "%.1f", a - b}')
		check_row "skill run overhead over bare python3 < 15 ms median" "$o ms" "$(awk -v o="$o" 'BEGIN {print o < 15}')"
	else check_row "skill run overhead over bare python3 < 15 ms median"; fi
	egress_targets
	dn=$(median deps none) dp=$(median deps prepared)
	if [ -n "$dn" ] && [ -n "$dp" ]; then
		o=$(awk -v a="$dp" -v b="$dn" 'BEGIN {printf "%.1f", a - b}')
		check_row "dependencies: a prepared environment adds < 2 ms to skill run" "$o ms" "$(awk -v o="$o" 'BEGIN {print o < 2}')"
	else check_row "dependencies: a prepared environment adds < 2 ms to skill run"; fi
	# Commands in a sandbox (skill exec, sandbox) against the entry-point path, same rounds.
	local de se sb
	de=$(median deps exec)
	if [ -n "$de" ] && [ -n "$dp" ]; then
		check_row "skill exec of a prepared skill <= skill run of it ($dp ms)" "$de ms" "$(awk -v a="$de" -v b="$dp" 'BEGIN {print a <= b}')"
	else check_row "skill exec of a prepared skill <= skill run of it"; fi
	se=$(median skill skillrun-exec) sb=$(median skill sandbox)
	if [ -n "$sb" ] && [ -n "$sk" ]; then
		check_row "sandbox -- python3 x.py <= skill run of a hello skill ($sk ms)" "$sb ms" "$(awk -v a="$sb" -v b="$sk" 'BEGIN {print a <= b}')"
	else check_row "sandbox -- python3 x.py <= skill run of a hello skill"; fi
	if [ -n "$se" ] && [ -n "$sk" ]; then
		awk -v a="$se" -v b="$sk" 'BEGIN {printf "| (context) skill exec of the hello skill vs skill run of it | %.1f ms vs %.1f ms | - |\n", a, b}'
	fi
	lc=$(median skill lcfloor)
	if [ -n "$lc" ] && [ -n "$py" ]; then
		awk -v a="$lc" -v b="$py" 'BEGIN {printf "| (context) libcontainer floor: lcfloor on the skill bundle over bare python3 | %.1f ms | no libcontainer runtime goes below it |\n", a - b}'
	fi
	rs=$(awk -F'\t' '$1 == "rss" && $2 == "skillrun-skill" {print $6}' "$tsv")
	if [ -n "$rs" ]; then check_row "skillrun skill run peak RSS < 20 MiB" "$rs MiB" "$(awk -v a="$rs" 'BEGIN {print a < 20}')"; else check_row "skillrun skill run peak RSS < 20 MiB"; fi
}

versions() {
	local r n
	for r in skillrun runc crun; do
		n=${meta[note.$r]:-}
		printf -- '- %s: %s%s\n' "$r" "${meta[version.$r]:-n/a}" "${n:+ ($n)}"
	done
	printf -- '- bwrap: %s; python3: %s; hyperfine: %s\n' "${meta[version.bwrap]:-n/a}" "${meta[version.python3]:-n/a}" "${meta[version.hyperfine]:-n/a}"
}

# Markdown tables to aligned text.
md2txt() { sed -e 's/^| //' -e 's/ |$//' -e '/^|---/d' -e 's/\*\*//g' -e 's/ | /\t/g' | column -t -s "$(printf '\t')" -o '  '; }

# report_text: the report on stdout (scope egress: the allowlist table and its targets only).
report_text() {
	echo
	if [ "${meta[scope]}" = egress ]; then
		echo "skillrun bench --only-egress, ${meta[date]}, ${meta[machine]}"
		echo "iterations: ${meta[runs]} after ${meta[warmup]} warm-up, in ${meta[rounds]} rounds"
		table egress egress-rss egress-rss-mcp | md2txt
		echo
		{ echo "| target | measured | result |"; echo "|---|---|---|"; egress_targets; } | md2txt
		return
	fi
	echo "skillrun bench, ${meta[date]}, ${meta[machine]}"
	echo "iterations: ${meta[runs]} after ${meta[warmup]} warm-up; ratio = median / ${meta[ref]} median (skill: / skillrun skill run)"
	table | md2txt
	echo
	cat "$mcp_md"
	echo
	targets | md2txt
}

# report_md: docs/benchmarks.md. The legend says how the figures were taken (it changes with the
# script); analysis of the figures is hand-written in docs/performance.md.
report_md() {
	echo "# Benchmarks"
	echo
	echo "Generated by \`make bench\` (\`hack/bench.sh\`) on ${meta[date]%%T*}; do not edit by hand."
	echo "Re-run on a quiet machine before quoting: numbers from a shared, busy machine are noisy."
	echo "Where the time goes and what bounds the targets: [performance.md](performance.md) (hand-written)."
	echo "Rendered from [benchmarks-data/](benchmarks-data/): \`hack/bench.sh --render-only docs/benchmarks-data\`"
	echo "renders this page again without measuring."
	echo
	echo "- Machine: ${meta[machine]}"
	versions
	echo "- Method: hyperfine -N (no shell), ${meta[warmup]} warm-up runs then ${meta[runs]} measured runs per row, in ${meta[rounds]}"
	echo "  rounds in which the rows of a table take turns (drift on this shared machine spreads evenly;"
	echo "  process start and cold run: 5 times as many rounds, targets a few percent apart);"
	echo "  bundle = busybox-static rootfs, read-only root, pid/net/ipc/uts/mount namespaces, no tty;"
	echo "  \`--root\` and the bundle on a tmpfs. Ratio = peer median / ${meta[ref]} median (the skill table:"
	echo "  / \`skillrun skill run\` median). \`floor\` is a bare fork+exec of /bin/true by hyperfine."
	echo "  \`lcfloor\` is hack/lcfloor, libcontainer with nothing around it (config.json, specconv,"
	echo "  Create, Run, Wait, Destroy) on the same bundle: the floor of any libcontainer runtime here."
	echo "  \`bwrap\`: --unshare-user/pid/ipc/uts/net, read-only /usr /lib /lib64 /bin, tmpfs /tmp,"
	echo "  --die-with-parent --clearenv. Peak RSS: GNU time %M, the max over the runtime process and"
	echo "  the children it reaps (runc's re-executed \`init\` included)."
	echo
	echo "![benchmark chart](benchmarks.png)"
	echo
	echo "## Targets"
	echo
	targets
	echo
	echo "## Results"
	table
	echo
	echo "## MCP server"
	echo
	echo "\`skillrun mcp serve\` (docs/mcp.md) over stdio (hack/mcpbench), driven by the MCP Go SDK's client, and the warm"
	echo "and ping rows by a raw JSON-RPC client (a line written, a line read: the client library's own work, 0.6-1 ms"
	echo "a call for the Go SDK's on this machine, is the agent's; one warm row and a ping through the SDK show it):"
	echo "each tools/call runs the hello skill in a fresh sandbox: cold (\`--pool 0\`: started for the call) or warm"
	echo "(\`--pool N\`: launched ahead, entry point waiting for its input; see docs/mcp.md). The warm rows' calls"
	echo "each find the pool refilled (the warm, pre-started and ping rows take 2.5x the calls of the others:"
	echo "the share is a difference of two medians, each spread by the interpreter's teardown). Their floor is python3 pre-started on the same script and left waiting"
	echo "on its stdin, no sandbox, with the environment a sandbox gives it (PATH, HOME, TMPDIR, LANG; not the"
	echo "invoker's PYTHON* variables: PYTHONUNBUFFERED, for one, moves the output's write to print time), from a pool of its own refilled as the server's is (one started just before"
	echo "its call has its memory still in the CPU's caches: its row is context): warm minus pre-started is"
	echo "skillrun's own share of a warm call. The ping row is the MCP transport alone (the server's SDK and"
	echo "stdio), part of every call and of that share. The os._exit"
	echo "rows run a copy of the skill whose entry ends with \`sys.stdout.flush(); os._exit(0)\` (a skill author's"
	echo "opt-in: no interpreter teardown). Sustained calls/s (back to back, concurrency 2) is bound by CPU,"
	echo "not by the refill: the refill launches nothing while calls run, so most of those calls run cold, and"
	echo "CPU per call x calls/s is compared with the machine's cores in the sustained line, as for the cold"
	echo "\`skill run\` rate (the notes under the table say what the CPU columns count). The burst row empties a"
	echo "full pool of 30."
	echo
	cat "$mcp_md"
}

# report_chart PNG: median bars with min..p95 whiskers of the time scenarios, grouped by scenario.
report_chart() {
	local png=$1 data
	data=$(mktemp "${TMPDIR:-/tmp}/skillrun-bench-chart.XXXXXX")
	# label, median, min, p95, colour index (one per peer); grouped by scenario.
	awk -F'\t' 'BEGIN {split("cold create start skill", o, " "); for (i in o) rank[o[i]] = i}
		($1 in rank) && $5 != "-" {
		c = ($2 == "skillrun" || $2 == "skillrun-run") ? 1 : ($2 == "runc") ? 2 : ($2 == "crun") ? 3 : ($2 == "floor" || $2 == "python3" || $2 == "lcfloor") ? 4 : 5
		printf "%d\t%d\t\"%s %s\"\t%s\t%s\t%s\t%d\n", rank[$1], NR, $1, $2, $5, $4, $6, c}' "$tsv" |
		sort -n -k1,1 -k2,2 | cut -f3- >"$data"
	gnuplot <<-EOF
		set terminal png size 1100,560 font ",10"
		set output "$png"
		set title "skillrun vs peers: median wall time, whiskers min..p95 (log scale, ms)\n${meta[machine]}, ${meta[date]%%T*}" noenhanced
		set logscale y
		set ylabel "ms"
		set grid ytics
		set style fill solid 0.8 border -1
		set xtics rotate by -40 scale 0 font ",9" noenhanced
		set key off
		set linetype 1 lc rgb "#1f77b4"
		set linetype 2 lc rgb "#ff7f0e"
		set linetype 3 lc rgb "#2ca02c"
		set linetype 4 lc rgb "#7f7f7f"
		set linetype 5 lc rgb "#9467bd"
		set yrange [0.3:*]
		set rmargin 8
		set label 1 "blue: skillrun  orange: runc  green: crun  grey: floor / python3 / lcfloor  purple: bwrap" at graph 0.01, graph 0.96 font ",9"
		plot "$data" using 0:2:(0.7):5:xtic(1) with boxes lc variable, \
		     "" using 0:2:3:4 with yerrorbars lc rgb "black" pt -1
	EOF
	rm -f "$data"
}
