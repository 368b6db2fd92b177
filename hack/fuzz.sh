#!/usr/bin/env bash
# Runs every fuzz target of the module, one after the other, for FUZZTIME
# each (go test fuzzes one target per run), and prints a table of what each
# did. With FUZZ_KEEP=1 the inputs the fuzzer found interesting (new
# coverage) are copied from Go's fuzz cache into the package's
# testdata/fuzz/<target>/, where every `go test` replays them; a failing
# input is written there by go test itself.
#
#   make fuzz FUZZTIME=1m [FUZZ_KEEP=1] [FUZZ=FuzzPrepare]
set -euo pipefail
cd "$(dirname "$0")/.."

fuzztime=${FUZZTIME:-30s}
# Minimizing a new input is capped so that it does not eat the run.
minimizetime=${FUZZMINIMIZETIME:-5s}
keep=${FUZZ_KEEP:-0}
only=${FUZZ:-}
cache="$(go env GOCACHE)/fuzz"
module="$(go list -m)"
logs="$(mktemp -d)"
trap 'rm -rf "$logs"' EXIT

# inputs counts the files in a corpus folder, 0 when there is none.
inputs() { if [[ -d "$1" ]]; then find "$1" -type f | wc -l; else echo 0; fi; }

rows=()
failed=0
for dir in $(grep -rl --include='*_test.go' '^func Fuzz' pkg cmd hack test 2>/dev/null | xargs -n1 dirname | sort -u); do
  for target in $(go test -list '^Fuzz' "./$dir" | grep '^Fuzz' || true); do
    [[ -n "$only" && "$target" != "$only" ]] && continue
    log="$logs/$target.log"
    echo "== $dir $target ($fuzztime)"
    start=$(date +%s)
    crashers_before=$(inputs "$dir/testdata/fuzz/$target")
    note=""
    if ! go test "./$dir" -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" \
        -fuzzminimizetime "$minimizetime" >"$log" 2>&1; then
      crashers_after=$(inputs "$dir/testdata/fuzz/$target")
      # Go 1.26's fuzz coordinator can report its own -fuzztime deadline as a
      # failure when a worker is mid-call as time runs out (go.dev/issue/75804,
      # fixed in Go 1.27): no input is written and nothing failed. Tell it
      # apart from a finding by the missing input, and replay the corpus. The
      # message sits above go test's closing lines (FAIL, exit status 1, the
      # package's FAIL line), so look at the last few lines, not the last one.
      if [[ "$crashers_after" == "$crashers_before" ]] && tail -8 "$log" | grep -q 'context deadline exceeded' \
          && go test "./$dir" -run "^${target}\$" >>"$log" 2>&1; then
        note=" (deadline race, go.dev/issue/75804)"
      else
        failed=1
        tail -40 "$log"
        echo "FAIL: $dir $target; a failing input is under $dir/testdata/fuzz/$target" >&2
        note=" FAILED"
      fi
    fi
    took=$(( $(date +%s) - start ))
    # The last progress line: "fuzz: elapsed: 30s, execs: 12345 (411/sec), new interesting: 3 (total: 12)"
    last=$(grep 'fuzz: elapsed:' "$log" | tail -1 || true)
    # The rate on that line covers only its last 3 s; give the run's own.
    execs=$(sed -n 's/.*elapsed: \([0-9]*\)s, execs: \([0-9]*\) .*/\2 \1/p' <<<"$last" \
      | awk '{ if ($2 > 0) printf "%d (%d/s)", $1, $1 / $2; else printf "%d", $1 }')
    interesting=$(sed -n 's/.*new interesting: \([0-9]*\) (total: \([0-9]*\)).*/\1 (corpus \2)/p' <<<"$last")
    kept=0
    src="$cache/$module/$dir/$target"
    if [[ "$keep" == 1 && -d "$src" ]]; then
      mkdir -p "$dir/testdata/fuzz/$target"
      for f in "$src"/*; do
        [[ -e "$dir/testdata/fuzz/$target/$(basename "$f")" ]] || { cp "$f" "$dir/testdata/fuzz/$target/"; kept=$((kept + 1)); }
      done
    fi
    rows+=("| \`$dir\` | $target$note | ${took}s | ${execs:-?} | ${interesting:-?} | $kept |")
  done
done

echo
echo "| package | fuzzer | wall | execs | new interesting | kept in testdata |"
echo "|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
exit $failed
