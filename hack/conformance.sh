#!/usr/bin/env bash
# hack/conformance.sh: run the OCI runtime-tools validation suite against skillrun, runc and crun in
# one run, side by side. Run `hack/conformance.sh --help` for usage.
set -euo pipefail

RT_MODULE=github.com/opencontainers/runtime-tools
RT_VERSION=v0.9.1-0.20251114084447-edf4cb3d2116

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=hack/lib/common.sh
. "$repo/hack/lib/common.sh"
# shellcheck source=hack/lib/conformance-report.sh
. "$repo/hack/lib/conformance-report.sh"

cache_dir=${XDG_CACHE_HOME:-$HOME/.cache}/skillrun
rt_dir=${RUNTIME_TOOLS_DIR:-$cache_dir/runtime-tools}
results=${RESULTS_DIR:-$repo/tmp/conformance}
skillrun=${SKILLRUN:-$repo/bin/skillrun}
notes=$repo/docs/conformance-notes.md
runtimes="skillrun runc crun"
test_filter=""
test_timeout=${CONFORMANCE_TIMEOUT:-120}
write_docs=1
setup_cgroups=1
isolate_root=1
render_dir=

usage() {
	cat <<EOF
Usage: hack/conformance.sh [options]

Builds the OCI runtime-tools validation suite ($RT_MODULE@$RT_VERSION, fetched through
the Go module proxy into $rt_dir, never committed), a busybox-static rootfs, and runs every
validation program against each runtime in the same run. Prints a per-test table (ok / not ok / skip)
and totals; writes raw TAP, the results (results.tsv, meta.tsv) and a summary (JSON + markdown)
under the results dir and regenerates docs/conformance.md from them, with the hand-written
diagnoses of docs/conformance-notes.md. Must run as root.

Exits 1 when skillrun passes fewer validation programs than runc in this run (and names them),
2 on a usage or set-up error.

Options:
  --runtimes "A B"   runtimes to run (default: "$runtimes"; crun is skipped with a reason when it
                     cannot run a trivial container here)
  --tests REGEX      only the validation programs whose name matches REGEX (docs are not rewritten)
  --results DIR      results dir (default: \$RESULTS_DIR or $results)
  --timeout SECONDS  per-program timeout (default: \$CONFORMANCE_TIMEOUT or $test_timeout)
  --no-docs          do not rewrite docs/conformance.md
  --no-cgroup-setup  do not mount the missing cgroup v1 controllers hugetlb and net_cls,net_prio
  --no-isolate       call the runtimes directly (RUNTIME=/abs/path) instead of through a wrapper
                     that adds a private --root state dir
  --render-only DIR  run nothing: print the table of the results a run saved in DIR and render
                     docs/conformance.md from them (not from a --tests run's; --no-docs: print
                     only). Needs neither root nor the suite.
  -h, --help         this text

Environment: SKILLRUN (default bin/skillrun), RUNTIME_TOOLS_DIR, RESULTS_DIR, CONFORMANCE_TIMEOUT.

Host changes (documented in docs/conformance.md): on a cgroup v1 / hybrid host the cgroup v1
controllers hugetlb and net_cls,net_prio are mounted under /sys/fs/cgroup when no hierarchy has them
(crun refuses to start any container otherwise; runc ignores them). They stay mounted.
EOF
}

while [ $# -gt 0 ]; do
	case $1 in
	--runtimes) runtimes=$2; shift 2 ;;
	--tests) test_filter=$2; shift 2 ;;
	--results) results=$2; shift 2 ;;
	--timeout) test_timeout=$2; shift 2 ;;
	--no-docs) write_docs=0; shift ;;
	--no-cgroup-setup) setup_cgroups=0; shift ;;
	--no-isolate) isolate_root=0; shift ;;
	--render-only) render_dir=$2; shift 2 ;;
	-h | --help) usage; exit 0 ;;
	*) echo "conformance: unknown argument $1 (see --help)" >&2; exit 2 ;;
	esac
done

log() { printf 'conformance: %s\n' "$*" >&2; }
die() { log "$*"; exit 2; }

# compare_line: skillrun's and runc's passes on stdout, and the programs that differ.
compare_line() {
	echo "skillrun passes $(passed_count skillrun) programs, runc $(passed_count runc)"
	[ ${#regressions[@]} -gt 0 ] && echo "runc passes, skillrun fails: ${regressions[*]}"
	[ ${#improvements[@]} -gt 0 ] && echo "skillrun passes, runc fails: ${improvements[*]}"
	return 0
}

if [ -n "$render_dir" ]; then
	conf_load "$render_dir" "$notes" || exit 2
	report_text
	if [ "$write_docs" -eq 1 ] && [ -z "${meta[filter]:-}" ]; then
		report_md >"$repo/docs/conformance.md"
		log "wrote docs/conformance.md"
	elif [ "$write_docs" -eq 1 ]; then
		log "$render_dir holds a --tests run's results: docs not rewritten"
	fi
	if is_active skillrun && is_active runc; then compare_line; fi
	exit 0
fi

[ "$(id -u)" -eq 0 ] || die "must run as root (the suite creates containers, cgroups and mounts)"
[ -n "$test_filter" ] && write_docs=0

"$repo/hack/install-deps.sh" test

# --- runtime-tools: fetch through the module proxy, build runtimetest + validation/*.t --------------
build_runtime_tools() {
	local stamp=$rt_dir/.skillrun-built src
	if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$RT_VERSION" ]; then
		return 0
	fi
	log "fetching $RT_MODULE@$RT_VERSION through the Go module proxy"
	src=$(cd / && GOFLAGS=-mod=mod go mod download -json "$RT_MODULE@$RT_VERSION" | jq -r .Dir)
	[ -d "$src" ] || die "go mod download did not give a source dir for $RT_MODULE@$RT_VERSION"
	rm -rf "$rt_dir"
	mkdir -p "$(dirname "$rt_dir")"
	cp -r "$src" "$rt_dir"
	chmod -R u+w "$rt_dir"
	# The module ships an empty vendor/ (its modules.txt only); with it `go build` insists on vendoring.
	rm -rf "$rt_dir/vendor"
	log "building runtimetest and validation programs in $rt_dir"
	(cd "$rt_dir" && GOFLAGS=-mod=mod make -s runtimetest validation-executables COMMIT="${RT_VERSION##*-}") >&2
	echo "$RT_VERSION" >"$stamp"
}

# --- rootfs-amd64.tar.gz from busybox-static (replaces the 2018 tarball the module ships) ----------
build_rootfs() {
	local tmp
	tmp=$(mktemp -d)
	busybox_rootfs "$tmp"
	# "./" in the archive becomes the bundle dir (root.path is "."): it must not keep mktemp's 0700,
	# or a non-root container user (process_user) cannot exec /runtimetest.
	chmod 0755 "$tmp"
	tar -C "$tmp" --owner=0 --group=0 -czf "$rt_dir/rootfs-$(go env GOARCH).tar.gz" .
	rm -rf "$tmp"
}

# --- cleanup helpers ----------------------------------------------------------------------------
# scrub DIR: remove a test's temp dir without ever following a leftover mount (unmount_under: hack/lib).
scrub() {
	[ -e "$1" ] || return 0
	unmount_under "$1"
	rm -rf --one-file-system "$1" 2>/dev/null || {
		unmount_under "$1"
		rm -rf --one-file-system "$1" || log "could not fully remove $1"
	}
}

devnull_want=""
# check_devnull RT TEST: some runtimes chown the host /dev/null when it is the container's stdio.
check_devnull() {
	local now
	now=$(stat -c '%u:%g:%a:%t:%T' /dev/null)
	if [ "$now" != "$devnull_want" ]; then
		log "$1 $2 changed host /dev/null ($devnull_want -> $now); restoring"
		printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$devnull_want" "$now" >>"$results/devnull-changes.tsv"
		if [ ! -c /dev/null ] || [ "${now##*:}" != "${devnull_want##*:}" ]; then
			rm -f /dev/null && mknod -m 666 /dev/null c 1 3
		fi
		chown "${devnull_want%%:*}:$(cut -d: -f2 <<<"$devnull_want")" /dev/null
		chmod "$(cut -d: -f3 <<<"$devnull_want")" /dev/null
	fi
}

# rt_cmd RT STATE: prints the command tests get as $RUNTIME.
declare -A rt_path=() rt_ver=() rt_note=()

# smoke RT PATH: can this runtime run a trivial container here? Prints the failure on stderr.
smoke() {
	local name=$1 path=$2 b rc=0
	b=$(mktemp -d)
	busybox_rootfs "$b/rootfs"
	write_true_config "$b" /bin/true
	timeout 30 "$path" --root "$b/state" run --bundle "$b" "smoke-$name-$$" </dev/null >"$b/out" 2>&1 || rc=$?
	"$path" --root "$b/state" delete --force "smoke-$name-$$" >/dev/null 2>&1 || true
	if [ "$rc" -ne 0 ]; then
		tail -n 3 "$b/out" | tr '\n' ' ' >&2
	fi
	scrub "$b"
	return "$rc"
}

# write_wrapper RT: the command the tests get as $RUNTIME: the runtime with a private --root. For crun
# 1.8.1, which rejects ociVersion 1.3.x ("unknown version specified") while runtime-tools writes the
# runtime-spec version it is built with (1.3.0), the bundle's config.json is presented as 1.1.0 (the newest it accepts) on
# create/run; nothing else in the config changes.
write_wrapper() {
	local r=$1
	echo '#!/bin/sh'
	if [ "$r" = crun ]; then
		cat <<-'EOF'
			bundle=. prev= verb=
			for a in "$@"; do
				case $prev in --bundle | -b) bundle=$a ;; esac
				case $a in --bundle=*) bundle=${a#--bundle=} ;; -*) ;; *) [ -z "$verb" ] && [ -z "$prev" -o "${prev#-}" = "$prev" ] && verb=$a ;; esac
				prev=$a
			done
			case $verb in create | run)
				[ -f "$bundle/config.json" ] && sed -i 's/"ociVersion": *"1\.3\.[0-9]*"/"ociVersion": "1.1.0"/' "$bundle/config.json" ;;
			esac
		EOF
	fi
	printf 'exec %q --root %q "$@"\n' "${rt_path[$r]}" "$work/state/$r"
}

detect_runtimes() {
	local r p err
	for r in $runtimes; do
		case $r in
		skillrun) p=$skillrun ;;
		*) p=$(command -v "$r" || true) ;;
		esac
		if [ -z "$p" ] || [ ! -x "$p" ]; then
			[ "$r" = skillrun ] && die "skillrun binary $skillrun missing: build it first (make skillrun) or pass --runtimes"
			rt_note[$r]="not installed"
			log "$r: not installed, skipped"
			continue
		fi
		p=$(realpath "$p")
		rt_ver[$r]=$(runtime_version "$r" "$p")
		if ! err=$(smoke "$r" "$p" 2>&1); then
			if [ "$r" = crun ]; then
				rt_note[$r]="cannot run a trivial container here: $err"
				log "$r: ${rt_note[$r]}; skipped"
				continue
			fi
			# skillrun and runc run regardless: their failures are the result.
			rt_note[$r]="smoke run failed: $err"
			log "$r: ${rt_note[$r]}"
		fi
		rt_path[$r]=$p
	done
}

# tap_counts FILE: prints "ok notok skip plan errors" (plan -1 when there is none; errors counts YAML
# diagnostics with a non-empty "error", which some programs print instead of a "not ok" line). Some programs print
# several TAP streams (one per sub-case, each with its own plan): the plans add up.
tap_counts() {
	awk '
		/^not ok/ {notok++; next}
		/^ok/ { if (tolower($0) ~ /# *skip/) skip++; else ok++; next }
		/^1\.\.[0-9]+/ {sub(/^1\.\./, ""); plan += $1 + 0; seen = 1}
		/"error": "[^"]/ {diag++}
		END {printf "%d %d %d %d %d\n", ok, notok, skip, seen ? plan : -1, diag}' "$1"
}

# run_one RT TEST: run one validation program, record its TAP and a results.tsv row.
run_one() {
	local r=$1 t=$2 out=$results/tap/$1 tmp rc=0 start end secs ok notok skip plan diag status cmd
	tmp=$work/tmp/$r/$t
	mkdir -p "$out" "$tmp"
	cmd=${rt_path[$r]}
	[ "$isolate_root" -eq 1 ] && cmd=$work/bin/$r
	start=$(date +%s.%N)
	(cd "$rt_dir" && TMPDIR=$tmp RUNTIME=$cmd timeout -k 10 "$test_timeout" "./validation/$t/$t.t") \
		</dev/null >"$out/$t.tap" 2>"$out/$t.stderr" || rc=$?
	end=$(date +%s.%N)
	secs=$(awk -v a="$start" -v b="$end" 'BEGIN {printf "%.1f", b - a}')
	read -r ok notok skip plan diag < <(tap_counts "$out/$t.tap")
	if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
		status=timeout
	elif [ "$plan" -lt 0 ] || [ "$rc" -ne 0 ]; then
		status=error
	elif [ "$notok" -gt 0 ] || [ $((ok + skip)) -ne "$plan" ] || { [ "$plan" -eq 0 ] && [ "$diag" -gt 0 ]; }; then
		status=fail
	elif [ "$ok" -eq 0 ]; then
		status=skip
	else
		status=pass
	fi
	printf '%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\n' "$r" "$t" "$status" "$ok" "$notok" "$skip" "$plan" "$rc" "$secs" >>"$results/results.tsv"
	{
		printf '# ---- %s (%s, exit %d, %ss)\n' "$t" "$status" "$rc" "$secs"
		cat "$out/$t.tap"
	} >>"$results/$r.tap"
	cleanup_after "$r" "$t"
	check_devnull "$r" "$t"
}

# cleanup_after RT TEST: force-delete containers the test left in our private state dir, then remove
# its temp dir (mounts first).
cleanup_after() {
	local r=$1 t=$2 id
	if [ "$isolate_root" -eq 1 ]; then
		for id in $("${rt_path[$r]}" --root "$work/state/$r" list -q 2>/dev/null || true); do
			log "$r $t left container $id; deleting"
			timeout 20 "${rt_path[$r]}" --root "$work/state/$r" delete --force "$id" >/dev/null 2>&1 || true
		done
	fi
	scrub "$work/tmp/$r/$t"
}

# failure_lines FILE: "not ok" descriptions with the error from their YAML block, one per line.
failure_lines() {
	awk '
		function flush() { if (desc != "") { print desc (err != "" ? " — " err : "") }; desc = ""; err = ""; inblk = 0 }
		/^not ok/ { flush(); desc = $0; sub(/^not ok [0-9]+ - ?/, "", desc); want = 1; next }
		/^ok/ { flush(); want = 0; next }
		want && /^  ---/ { inblk = 1; next }
		want && /^  \.\.\./ { flush(); want = 0; next }
		inblk && err == "" && /"error": "/ { e = $0; sub(/.*"error": "/, "", e); sub(/",?$/, "", e); err = e }
		END { flush() }' "$1" | sed -e 's/\\n\\t\* / /g' -e 's/\\n/ /g' -e 's/\\t/ /g' -e 's/\\"/"/g' -e 's/  */ /g' | cut -c1-300
}

# --- main -----------------------------------------------------------------------------------------
build_runtime_tools
build_rootfs
[ "$setup_cgroups" -eq 1 ] && ensure_cgroup_v1

work=$(mktemp -d "${TMPDIR:-/tmp}/skillrun-conformance.XXXXXX")
# Traversable: with a user namespace the container's root is an unprivileged host uid that must reach
# the bundle below $work/tmp (linux_uid_mappings, linux_ns_nopath fail with EACCES otherwise).
chmod 0755 "$work"
trap 'scrub "$work"' EXIT
rm -rf "$results"
mkdir -p "$results/tap" "$work/bin"
devnull_want=$(stat -c '%u:%g:%a:%t:%T' /dev/null)
if [ "$devnull_want" != "0:0:666:1:3" ]; then
	log "host /dev/null is $devnull_want before the run, expected 0:0:666:1:3; restoring"
	devnull_want=0:0:666:1:3
	check_devnull host before-run
fi

detect_runtimes
active=()
for r in $runtimes; do
	[ -n "${rt_path[$r]:-}" ] || continue
	active+=("$r")
	mkdir -p "$work/state/$r"
	write_wrapper "$r" >"$work/bin/$r"
	chmod +x "$work/bin/$r"
done
[ ${#active[@]} -gt 0 ] || die "no runtime to test"

mapfile -t tests < <(cd "$rt_dir/validation" && for d in */; do
	d=${d%/}
	[ -x "$d/$d.t" ] && echo "$d"
done | grep -E -- "${test_filter:-.}")
[ ${#tests[@]} -gt 0 ] || die "no validation program matches ${test_filter}"

log "running ${#tests[@]} validation programs against: ${active[*]} (timeout ${test_timeout}s each)"
: >"$results/results.tsv"
for t in "${tests[@]}"; do
	for r in "${active[@]}"; do
		run_one "$r" "$t"
	done
	printf '%-40s' "$t" >&2
	for r in "${active[@]}"; do
		printf ' %s=%s' "$r" "$(awk -F'\t' -v r="$r" -v t="$t" '$1 == r && $2 == t {print $3}' "$results/results.tsv")" >&2
	done
	echo >&2
done

# --- report: the results' data, then what is rendered from it (hack/lib/conformance-report.sh) ------
{
	printf 'date\t%s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
	printf 'machine\t%s\n' "$(machine_line)"
	printf 'cgroupfs\t%s\n' "$(stat -f -c %T /sys/fs/cgroup)"
	printf 'busybox\t%s\n' "$(dpkg-query -W -f='${Version}' busybox-static 2>/dev/null || echo unknown)"
	printf 'suite\t%s\n' "$RT_MODULE@$RT_VERSION"
	printf 'timeout\t%s\n' "$test_timeout"
	printf 'filter\t%s\n' "$test_filter"
	printf 'runtimes\t%s\n' "${runtimes//[$'\t\n']/ }"
	printf 'active\t%s\n' "${active[*]}"
	for r in $runtimes; do
		[ -n "${rt_ver[$r]+set}" ] && printf 'version.%s\t%s\n' "$r" "${rt_ver[$r]}"
		printf 'note.%s\t%s\n' "$r" "${rt_note[$r]:-}"
	done
} >"$results/meta.tsv"
conf_load "$results" "$notes"
report_text

# JSON summary.
{
	jq -Rn --arg version "$RT_VERSION" --arg date "$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
		--arg machine "$(machine_line)" '
		[inputs | split("\t") | {runtime: .[0], test: .[1], status: .[2], ok: (.[3]|tonumber),
		  not_ok: (.[4]|tonumber), skip: (.[5]|tonumber), plan: (.[6]|tonumber), exit: (.[7]|tonumber),
		  seconds: (.[8]|tonumber)}] as $rows
		| {runtime_tools: $version, date: $date, machine: $machine,
		   totals: ($rows | group_by(.runtime) | map({key: .[0].runtime, value: {
		     programs: length, passed: map(select(.status == "pass" or .status == "skip")) | length,
		     ok: (map(.ok) | add), not_ok: (map(.not_ok) | add), skip: (map(.skip) | add)}}) | from_entries),
		   results: $rows}' <"$results/results.tsv"
} >"$results/summary.json.tmp"
versions_json=$(for r in "${!rt_ver[@]}"; do printf '%s\t%s\t%s\n' "$r" "${rt_ver[$r]}" "${rt_note[$r]:-}"; done |
	jq -Rn '[inputs | split("\t") | {key: .[0], value: {version: .[1], note: .[2]}}] | from_entries')
notes_json=$(for r in "${!rt_note[@]}"; do printf '%s\t%s\n' "$r" "${rt_note[$r]}"; done |
	jq -Rn '[inputs | split("\t") | {key: .[0], value: .[1]}] | from_entries')
jq --argjson v "$versions_json" --argjson n "$notes_json" \
	--arg reg "${regressions[*]:-}" --arg imp "${improvements[*]:-}" \
	'. + {runtimes: $v, notes: $n, skillrun_fails_runc_passes: ($reg | split(" ") | map(select(. != ""))),
	      skillrun_passes_runc_fails: ($imp | split(" ") | map(select(. != "")))}' \
	"$results/summary.json.tmp" >"$results/summary.json"
rm -f "$results/summary.json.tmp"

summary_md >"$results/summary.md"

if [ "$write_docs" -eq 1 ]; then
	report_md >"$repo/docs/conformance.md"
	log "wrote docs/conformance.md"
fi

log "results in $results (results.tsv, summary.json, summary.md, <runtime>.tap, tap/<runtime>/<test>.tap)"
if [ -n "${rt_path[skillrun]:-}" ] && [ -n "${rt_path[runc]:-}" ]; then
	compare_line
	ps_=$(passed_count skillrun)
	pr_=$(passed_count runc)
	if [ "$ps_" -lt "$pr_" ]; then
		echo "FAIL: skillrun passes fewer validation programs than runc ($ps_ < $pr_)" >&2
		exit 1
	fi
fi
exit 0
