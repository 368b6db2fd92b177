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

rows=()
failed=0
for dir in $(grep -rl --include='*_test.go' '^func Fuzz' pkg cmd hack test 2>/dev/null | xargs -n1 dirname | sort -u); do
  for target in $(go test -list '^Fuzz' "./$dir" | grep '^Fuzz' || true); do
    [[ -n "$only" && "$target" != "$only" ]] && continue
    log="$logs/$target.log"
    echo "== $dir $target ($fuzztime)"
    start=$(date +%s)
    crashers_before=$(ls "$dir/testdata/fuzz/$target" 2>/dev/null | wc -l)
    note=""
    if ! go test "./$dir" -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" \
        -fuzzminimizetime "$minimizetime" >"$log" 2>&1; then
      crashers_after=$(ls "$dir/testdata/fuzz/$target" 2>/dev/null | wc -l)
      # Go 1.26's fuzz coordinator can report its own -fuzztime deadline as a
      # failure when a worker is mid-call as time runs out (go.dev/issue/75804,
      # fixed in Go 1.27): no input is written and nothing failed. Tell it
      # apart from a finding by the missing input, and replay the corpus.
      if [[ "$crashers_after" == "$crashers_before" ]] && tail -3 "$log" | grep -q 'context deadline exceeded' \
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
    execs=$(sed -n 's/.*execs: \([0-9]*\) (\([0-9]*\)\/sec).*/\1 (\2\/s)/p' <<<"$last")
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
