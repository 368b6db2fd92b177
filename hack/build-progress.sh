#!/usr/bin/env bash
# Turns the output of `go build -v` (standard input) into a progress line
# every PROGRESS_EVERY compiled packages and every 50 downloaded modules,
# with the seconds since the build began; everything else (compiler errors)
# passes through. A warm build compiles nothing and prints nothing.
#
#   go build -v ./cmd/x 2>&1 | hack/build-progress.sh bin/x
label=${1:-build}
every=${PROGRESS_EVERY:-250}
start=$SECONDS
compiled=0
downloaded=0
while IFS= read -r line; do
  case $line in
    "go: downloading "*)
      downloaded=$((downloaded + 1))
      if ((downloaded % 50 == 0)); then
        echo "  $label: downloaded $downloaded modules ($((SECONDS - start))s)"
      fi ;;
    "" | *" "* | *:* | "#"*) printf '%s\n' "$line" ;;
    *)
      compiled=$((compiled + 1))
      if ((compiled % every == 0)); then
        echo "  $label: compiled $compiled packages ($((SECONDS - start))s)"
      fi ;;
  esac
done
if ((compiled > 0)); then
  echo "  $label: built, $compiled packages compiled in $((SECONDS - start))s"
fi
