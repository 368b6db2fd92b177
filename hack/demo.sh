#!/usr/bin/env bash
# make demo: builds the sandbox with progress, plays the fallback, the
# week-swap and the guarantee-reclaim scenarios (each prints its report and
# writes an HTML timeline), then sums up what was shown and where the
# timelines are.
# A scenario that fails makes the whole run fail, after all have played,
# without the summary of what a passing run shows.
set -euo pipefail
cd "$(dirname "$0")/.."
MAKE=${MAKE:-make}
DEMO_DIR=${DEMO_DIR:-$PWD/bin/demo}
start=$SECONDS

step() { printf '\n== %s (%ds so far)\n' "$*" "$((SECONDS - start))"; }

cat <<EOT
== make demo: Rota end to end on this machine; no cluster and no GPU needed.
   1. Build bin/rota-sandbox with Go. The first time, Go downloads the modules
      and compiles Kubernetes: about 13 minutes on 2 cores, with a progress
      line every 250 packages. After that it takes seconds.
   2. Play three scenarios on a virtual clock (about 15, 25 and 20 s of real
      time).
      Each runs on a fresh local control plane: kube-apiserver and etcd in
      process, Rota's scheduler and controllers, and simulated GPU nodes that
      run Rota's real DRA driver on mock NVML.
      - fallback: claims ask for "H100, else A100"; Rota fills H100s, then
        A100s, skips an unhealthy H100, and says why the last pod waits.
      - week-swap: a DeploySchedule swaps llama70b (day) and qwen32b (night)
        on 10 H100s for a simulated week; no GPU is ever double-booked.
      - guarantee-reclaim: team-b borrows idle team-a's guaranteed H100s;
        team-a's 4-GPU gang takes them back from team-b's newest borrowers,
        one asked to checkpoint first; then guarantees beyond the pool.
   Each scenario prints its report. The HTML timelines are written under
   $DEMO_DIR.
EOT

step "1/4 Building bin/rota-sandbox"
"$MAKE" -s --no-print-directory PROGRESS=1 bin/rota-sandbox

failed=()
play() {
  local name=$1
  step "$2 Scenario $name (progress on the left, in real seconds; report below)"
  if ! bin/rota-sandbox run --scenario "examples/scenarios/$name.yaml" \
      --dir "$DEMO_DIR/$name" --timeline "$DEMO_DIR/$name.html"; then
    failed+=("$name")
  fi
}
play fallback 2/4
play week-swap 3/4
play guarantee-reclaim 4/4

step "Done"
if ((${#failed[@]} > 0)); then
  echo "FAILED: ${failed[*]} (the report above says which expectation)" >&2
  exit 1
fi
cat <<EOT
What you saw:
  - fallback: every claim got the best GPU model free (H100, then A100),
    an H100 freed was taken again, an unhealthy H100 was skipped, and the
    pod that fits nowhere waits with its reason and the advice that would
    admit it (the same text as \`kubectl rota why\`).
  - week-swap: the schedule's transitions at 08:00 and 18:00 each weekday
    and around Wednesday's maintenance window, never more than 10 GPUs in use.
  - guarantee-reclaim: team-b's jobs beyond its guarantee were marked
    borrowers (rota.dev/borrowed); team-a's gang was placed whole once its
    newest two were evicted, b-7 after it was asked to checkpoint (its
    grace ran out: nothing acknowledges here), and team-b kept 12 GPUs.
    The Events on the evicted pods say why, with the numbers. With team-b's
    guarantee raised to 16, every GPUQuota's GuaranteesFit condition says
    the guarantees (24) exceed the 16 H100s.
Open the timelines in a browser (GPUs per node over time, the transitions,
the waiting pods):
  file://$DEMO_DIR/fallback.html
  file://$DEMO_DIR/week-swap.html
  file://$DEMO_DIR/guarantee-reclaim.html
Logs of each run: $DEMO_DIR/<scenario>/sandbox.log. Next, a sandbox that keeps
running for you to explore with kubectl (make bin/kubectl builds it from go.mod's
Kubernetes, about 4 minutes the first time):
  bin/rota-sandbox up --nodes dgx-h100:2,dgx-a100:1
then bin/kubectl with the KUBECONFIG it prints.
EOT
