# shellcheck shell=bash
# Renders hack/conformance.sh's results: the text table, summary.md and docs/conformance.md. Sourced
# by hack/conformance.sh; it defines functions only, and reads nothing but a results dir and the
# hand-written diagnoses of docs/conformance-notes.md:
#
#   results.tsv           RUNTIME TEST STATUS OK NOTOK SKIP PLAN EXIT SECONDS, one row per program run
#   meta.tsv              KEY VALUE: date, machine, cgroupfs, busybox, suite, timeout, runtimes (as
#                         asked), active (those run), version.RUNTIME, note.RUNTIME
#   tap/RT/TEST.tap       each program's TAP output; tap/RT/TEST.stderr its stderr
#   devnull-changes.tsv   RUNTIME TEST BEFORE AFTER: host /dev/null changes restored (when any)
#
#   conf_load DIR NOTES   read DIR's results and NOTES' diagnoses (sets results, meta, tests, active,
#                         asked, reason, regressions, improvements)
#   report_text           the per-program table printed by hack/conformance.sh
#   summary_md            the results dir's summary.md
#   report_md             docs/conformance.md
#   passed_count RT       programs RT passed
#   differences           sets regressions (runc passes, skillrun does not) and improvements

declare -A meta=() reason=()
results=''
tests=() active=() asked=() regressions=() improvements=()

# conf_load DIR NOTES: load the results dir DIR and the diagnoses table of NOTES.
conf_load() {
	local dir=$1 notes=$2 k v
	if [ ! -f "$dir/results.tsv" ] || [ ! -f "$dir/meta.tsv" ]; then
		echo "conformance: $dir has no results.tsv and meta.tsv (the results hack/conformance.sh saves)" >&2
		return 2
	fi
	results=$dir
	meta=()
	while IFS=$'\t' read -r k v; do
		[ -z "$k" ] || meta[$k]=$v
	done <"$dir/meta.tsv"
	for k in date machine cgroupfs busybox suite timeout runtimes active; do
		[ -n "${meta[$k]:-}" ] || { echo "conformance: $dir/meta.tsv has no $k" >&2; return 2; }
	done
	read -r -a asked <<<"${meta[runtimes]}"
	read -r -a active <<<"${meta[active]}"
	mapfile -t tests < <(awk -F'\t' '!seen[$2]++ {print $2}' "$dir/results.tsv")
	reason=()
	if [ -f "$notes" ]; then
		while IFS=$'\t' read -r k v; do
			reason[$k]=$v
		done < <(diagnoses "$notes")
	fi
	differences
}

# diagnoses NOTES: "PROGRAM<TAB>WHY" for each program of the diagnoses table in NOTES: rows whose
# first cell names programs in backticks (`a`, `b`), the second cell the diagnosis.
diagnoses() {
	awk '/^\| `/ {
		line = substr($0, 3); sub(/ \|[ \t]*$/, "", line)
		i = index(line, " | "); if (i == 0) next
		names = substr(line, 1, i - 1); why = substr(line, i + 3)
		while (match(names, /`[^`]+`/)) {
			print substr(names, RSTART + 1, RLENGTH - 2) "\t" why
			names = substr(names, RSTART + RLENGTH)
		}
	}' "$1"
}

is_active() { [[ " ${active[*]} " == *" $1 "* ]]; }

# passed_count RT: programs with no "not ok", a complete plan and exit 0 ("skip" = every case
# skipped, which TAP harnesses count as passed too).
passed_count() { awk -F'\t' -v r="$1" '$1 == r && ($3 == "pass" || $3 == "skip")' "$results/results.tsv" | wc -l; }
cell() { awk -F'\t' -v r="$1" -v t="$2" '$1 == r && $2 == t {printf "%s %d/%d/%d", $3, $4, $5, $6}' "$results/results.tsv"; }

# differences: programs runc passes and skillrun does not (the CI gate), and the reverse.
differences() {
	local t s c pass_s pass_c
	regressions=() improvements=()
	if ! is_active skillrun || ! is_active runc; then return 0; fi
	for t in "${tests[@]}"; do
		s=$(cell skillrun "$t" | cut -d' ' -f1)
		c=$(cell runc "$t" | cut -d' ' -f1)
		pass_s=0 pass_c=0
		case $s in pass | skip) pass_s=1 ;; esac
		case $c in pass | skip) pass_c=1 ;; esac
		[ "$pass_c" -eq 1 ] && [ "$pass_s" -eq 0 ] && regressions+=("$t")
		[ "$pass_c" -eq 0 ] && [ "$pass_s" -eq 1 ] && improvements+=("$t")
	done
	return 0
}

table_md() {
	local r t
	printf '| test program |'
	for r in "${active[@]}"; do printf ' %s |' "$r"; done
	printf '\n|---|'
	for r in "${active[@]}"; do printf '%s' '---|'; done
	printf '\n'
	for t in "${tests[@]}"; do
		printf '| %s |' "$t"
		for r in "${active[@]}"; do printf ' %s |' "$(cell "$r" "$t")"; done
		printf '\n'
	done
	printf '| **programs passed** |'
	for r in "${active[@]}"; do printf ' **%d / %d** |' "$(passed_count "$r")" "${#tests[@]}"; done
	printf '\n| **cases ok / not ok / skip** |'
	for r in "${active[@]}"; do
		awk -F'\t' -v r="$r" '$1 == r {o += $4; n += $5; s += $6} END {printf " %d / %d / %d |", o, n, s}' "$results/results.tsv"
	done
	printf '\n'
}

# report_text: the plain per-program table.
report_text() {
	local r t
	printf '%-40s' "TEST (status ok/notok/skip)"
	for r in "${active[@]}"; do printf ' %-22s' "$r"; done
	echo
	for t in "${tests[@]}"; do
		printf '%-40s' "$t"
		for r in "${active[@]}"; do printf ' %-22s' "$(cell "$r" "$t")"; done
		echo
	done
	printf '%-40s' "PROGRAMS PASSED"
	for r in "${active[@]}"; do printf ' %-22s' "$(passed_count "$r") / ${#tests[@]}"; done
	echo
	printf '%-40s' "CASES ok/notok/skip"
	for r in "${active[@]}"; do
		awk -F'\t' -v r="$r" '$1 == r {o += $4; n += $5; s += $6} END {printf " %-22s", o "/" n "/" s}' "$results/results.tsv"
	done
	echo
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

# failure_section RT: markdown list of every failing program of RT with its TAP failure lines and
# its diagnosis from docs/conformance-notes.md.
failure_section() {
	local r=$1 t st line bt='`'
	for t in "${tests[@]}"; do
		st=$(cell "$r" "$t" | cut -d' ' -f1)
		case $st in pass | skip | "") continue ;; esac
		printf -- '- **%s** (%s)' "$t" "$st"
		[ -n "${reason[$t]:-}" ] && printf ': %s' "${reason[$t]}"
		printf '\n'
		failure_lines "$results/tap/$r/$t.tap" | head -n 6 | while IFS= read -r line; do
			printf '  - %snot ok%s %s\n' "$bt" "$bt" "${line//|/\\|}"
		done
		if [ "$st" = error ] || [ "$st" = timeout ]; then
			tail -n 3 "$results/tap/$r/$t.stderr" 2>/dev/null | cut -c1-300 | while IFS= read -r line; do
				printf '  - stderr: %s%s%s\n' "$bt" "${line//$bt/\'}" "$bt"
			done
		fi
	done
}

# runtime_lines: "- RT: version — note" for each runtime asked for.
runtime_lines() {
	local r n
	for r in "${asked[@]}"; do
		n=${meta[note.$r]:-}
		printf -- '- %s: %s%s\n' "$r" "${meta[version.$r]:-n/a}" "${n:+ — $n}"
	done
}

summary_md() {
	echo "# Conformance run ${meta[date]}"
	echo
	echo "runtime-tools \`${meta[suite]##*@}\`, ${meta[machine]}"
	echo
	runtime_lines
	echo
	echo "Cells: status ok/not ok/skip (TAP cases)."
	echo
	table_md
}

# report_md: docs/conformance.md. The legends and the host set-up notes describe the script; why a
# program fails is hand-written in docs/conformance-notes.md.
report_md() {
	local r
	echo "# OCI runtime-tools conformance"
	echo
	echo "Generated by \`make conformance\` (\`hack/conformance.sh\`) on ${meta[date]%%T*}; do not edit by hand."
	echo "Why programs fail (the diagnoses shown below) is hand-written in [conformance-notes.md](conformance-notes.md)."
	echo
	echo "- Suite: \`${meta[suite]}\` (runtimetest + ${#tests[@]} \`validation/*\` programs, built from the module, not vendored)"
	echo "- Rootfs: Debian busybox-static (${meta[busybox]})"
	echo "- Machine: ${meta[machine]}; cgroups: ${meta[cgroupfs]/tmpfs/v1 (hybrid)}"
	runtime_lines
	echo
	echo "## Totals"
	echo
	echo "| runtime | programs passed | cases ok | not ok | skip |"
	echo "|---|---|---|---|---|"
	for r in "${active[@]}"; do
		awk -F'\t' -v r="$r" -v n="${#tests[@]}" '$1 == r {o += $4; x += $5; s += $6; if ($3 == "pass" || $3 == "skip") p++}
			END {printf "| %s | %d / %d | %d | %d | %d |\n", r, p, n, o, x, s}' "$results/results.tsv"
	done
	echo
	echo "A program passes when its TAP output has a complete plan, no \`not ok\` line and it exits 0"
	echo "(all-skipped counts as passed, as TAP harnesses count it). \`make conformance\` fails when skillrun"
	echo "passes fewer programs than runc in the same run."
	echo
	if is_active skillrun && is_active runc; then
		echo "## skillrun vs runc"
		echo
		echo "- runc passes, skillrun fails: ${regressions[*]:-none}"
		echo "- skillrun passes, runc fails: ${improvements[*]:-none}"
		echo
	fi
	echo "## Per program"
	echo
	echo "Cells: status ok/not ok/skip (TAP cases). Status: pass, skip (every case skipped), fail (a"
	echo "\`not ok\` or an incomplete plan), error (no plan or non-zero exit), timeout (${meta[timeout]}s)."
	echo
	table_md
	echo
	if is_active runc; then
		echo "## Where runc fails on this host, and why"
		echo
		echo "First TAP failure lines of each program runc does not pass, with the diagnosis where known."
		echo
		failure_section runc
		echo
	fi
	for r in "${active[@]}"; do
		[ "$r" = runc ] && continue
		echo "## $r failures"
		echo
		failure_section "$r"
		echo
	done
	echo "## Host set-up and gotchas handled by the script"
	echo
	echo "- crun cannot start any container on this cgroup v1 host unless the \`hugetlb\` and"
	echo "  \`net_cls,net_prio\` hierarchies are mounted; the script mounts them under /sys/fs/cgroup"
	echo "  when no hierarchy has them (\`--no-cgroup-setup\` to skip). runc and skillrun do not need them."
	echo "- Each program runs with its own \`TMPDIR\`; afterwards every mount left under it is"
	echo "  unmounted lazily, deepest first, before \`rm -rf --one-file-system\`."
	echo "- Each runtime gets a private \`--root\` state dir through a one-line wrapper, so leftover"
	echo "  containers are force-deleted without touching other users of /run/runc, /run/crun."
	echo "- Host \`/dev/null\` owner and mode are checked after every program and restored if changed."
	if [ -s "$results/devnull-changes.tsv" ]; then
		echo "  This run: $(awk -F'\t' '{printf "%s%s/%s (%s -> %s)", sep, $1, $2, $3, $4; sep = ", "}' "$results/devnull-changes.tsv")."
	fi
	echo "- Per-program timeout (${meta[timeout]}s, \`--timeout\`), killing the whole process group."
}
