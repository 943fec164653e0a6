#!/usr/bin/env bash
# Runs every fuzz target (func Fuzz...) of the given Go modules for a set
# time each, and prints one summary line per target with its exec count.
# A crash fails the run; `go test` has then saved the input under the
# package's testdata/fuzz/, where every later `go test` replays it.
#
# usage: hack/fuzz.sh FUZZ_TIME MODULE...
set -euo pipefail
fuzztime=${1:?usage: hack/fuzz.sh FUZZ_TIME MODULE...}
shift
root=$(pwd)
summary=()
status=0
for mod in "$@"; do
	cd "$root/$mod"
	# `go test -list` prints a package's matching names, then "ok <pkg>".
	targets=()
	while read -r line; do
		case "$line" in
		Fuzz*) targets+=("$line") ;;
		"ok "*)
			pkg=$(awk '{print $2}' <<<"$line")
			for t in "${targets[@]}"; do
				echo "==> fuzzing $pkg $t for $fuzztime"
				log=$(mktemp)
				go test -run '^$' -fuzz "^${t}\$" -fuzztime "$fuzztime" "$pkg" >"$log" 2>&1 || true
				# The fuzzing engine itself can fail a run whose time ran
				# out while a worker was still busy ("context deadline
				# exceeded", no failing input written): on a loaded machine
				# that is no finding, so it is run once more. A real crash
				# always writes its input and is never retried.
				if ! grep -q '^ok ' "$log" && grep -q 'context deadline exceeded' "$log" && ! grep -q 'Failing input written' "$log"; then
					echo "==> $t: the fuzzing engine ran out of time without a finding; once more"
					go test -run '^$' -fuzz "^${t}\$" -fuzztime "$fuzztime" "$pkg" >"$log" 2>&1 || true
				fi
				grep -v '^fuzz: elapsed' "$log" || true
				if ! grep -q '^ok ' "$log"; then
					status=1
					summary+=("FAIL $pkg $t: see the output above")
				else
					# A target still gathering its baseline when time runs out
					# prints no exec count; that is no failure.
					execs=$(grep -o 'execs: [0-9]*' "$log" | tail -1 | awk '{print $2}' || true)
					summary+=("ok   $pkg $t execs=${execs:-0}")
				fi
				rm -f "$log"
			done
			targets=()
			;;
		FAIL*)
			status=1
			summary+=("FAIL listing the fuzz targets: $line")
			;;
		esac
	done < <(go test -list '^Fuzz' ./... 2>&1)
done
echo "==> fuzz summary (${fuzztime} per target)"
printf '%s\n' "${summary[@]}"
exit $status
