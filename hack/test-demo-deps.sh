#!/usr/bin/env bash
# Checks that `hack/install-deps.sh demo` installs only what `make demo`
# runs, and everything the example skills it runs need: each package of
# its list must be used, either by a command at a command position of
# what the demo runs (the Makefile's demo recipe, hack/demo.sh, the
# scripts it sources and hack/ensure-test-user.sh), or as the interpreter
# or installer of an example skill the demo runs (*.py: python3, *.js:
# nodejs, requirements.txt: python3-pip); and a skill's need must be in
# the list. Run by hack/test.sh (unit step); exit 1 on a finding.
set -euo pipefail
cd "$(dirname "$0")/.."

line=$(grep -E '^want_demo=\(' hack/install-deps.sh) || { echo "test-demo-deps: no want_demo=(...) in hack/install-deps.sh" >&2; exit 1; }
line=${line%%#*}
eval "$line"

# What the demo runs, comments dropped.
scripts=(hack/demo.sh hack/lib/common.sh hack/ensure-test-user.sh)
text=$(
	sed -n '/^demo:/,/^$/p' Makefile
	sed -e 's/^[[:space:]]*#.*//' "${scripts[@]}"
)

# The commands a package supplies: its files in a bin folder (when it is
# installed), and for the interpreters their binary, which Debian ships in
# another package (python3-minimal).
commands() {
	local p=$1
	case $p in
	python3) echo python3 ;;
	nodejs) echo node ;;
	esac
	dpkg -L "$p" 2>/dev/null | grep -E '^(/usr)?/s?bin/[^/]+$' | xargs -r -n1 basename
	return 0
}

# uses_command NAME: NAME is run by the demo at a command position (line
# start, after ; & | ! ' $( or ( (not an array's =( ), or a keyword, or
# after runuser's --), and is
# not a bash builtin or keyword there (bash's kill is not procps' kill).
uses_command() {
	local c=$1 re
	case $(type -t "$c" 2>/dev/null) in builtin | keyword) return 1 ;; esac
	re="(^|[;&|'{]|(^|[[:space:]])![[:space:]]|(^|[^=])\\(|\\b(then|do|else|if|while|until|exec|time)[[:space:]]|--[[:space:]])[[:space:]]*${c//./\\.}([[:space:]]|$|[;)|&])"
	grep -qE "$re" <<<"$text"
}

# The example skills the demo runs, and what their files need.
declare -A skill_needs=()
for s in $(grep -oE '\$skills/[a-z0-9-]+' hack/demo.sh | sort -u); do
	dir=examples/skills/${s#\$skills/}
	[ -d "$dir" ] || { echo "test-demo-deps: demo.sh runs $s, not in examples/skills" >&2; exit 1; }
	find "$dir" -name '*.py' | grep -q . && skill_needs[python3]+=" ${dir##*/}"
	find "$dir" \( -name '*.js' -o -name '*.mjs' -o -name '*.cjs' \) | grep -q . && skill_needs[nodejs]+=" ${dir##*/}"
	find "$dir" -name requirements.txt | grep -q . && skill_needs[python3-pip]+=" ${dir##*/}"
done

fail=0 passed=0
for p in "${want_demo[@]}"; do
	why=
	for c in $(commands "$p"); do
		if uses_command "$c"; then
			why+=" $c"
		fi
	done
	if [ -n "$why" ]; then
		why="runs$why"
	fi
	if [ -n "${skill_needs[$p]:-}" ]; then
		why="${why:+$why; }needed by the skills${skill_needs[$p]}"
	fi
	if [ -z "$why" ]; then
		echo "test-demo-deps: FAIL: $p is in install-deps.sh's demo list, but nothing make demo runs uses it (commands: $(commands "$p" | tr '\n' ' '))" >&2
		fail=$((fail + 1))
	else
		echo "test-demo-deps: $p: $why"
		passed=$((passed + 1))
	fi
done
for p in "${!skill_needs[@]}"; do
	if [[ " ${want_demo[*]} " != *" $p "* ]]; then
		echo "test-demo-deps: FAIL: the skills${skill_needs[$p]} that make demo runs need $p, not in install-deps.sh's demo list" >&2
		fail=$((fail + 1))
	fi
done
echo "test-demo-deps: $passed passed, $fail failed"
[ "$fail" -eq 0 ]
