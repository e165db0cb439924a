#!/usr/bin/env bash
# The regression gate's error rates on this machine (issue 38; docs/measurements.md, "The gate's
# false alarms and misses"):
#   bench/gate_false_alarms.sh quiet   [comparisons] [threshold] [rounds]   the same build against
#                                                                             itself
#   bench/gate_false_alarms.sh hog     [comparisons] [threshold] [rounds]   the same, with a busy loop
#                                                                             on one core during half
#                                                                             of the runs
#   bench/gate_false_alarms.sh planted [comparisons] [threshold] [rounds]   new runs 20% slower per
#                                                                             op (TS_TEST_SLOW_OP='*:0.2')
# Each comparison is what scripts/ci-compare does in small: ROUNDS rounds (default 2) of a
# one-entry suite (resnet50 tiny, batch 4, 15 timed iterations after 2, one thread) into a.db and
# b.db, A B then B A then A B ..., then `compare a.db b.db --fail-on-regression THRESHOLD`
# (default 10). From 4 rounds the comparison is over the runs' medians (kMinRepetitions). In `hog` mode each
# run is disturbed or not by a seeded coin, so that some comparisons have one side disturbed and
# the other quiet, the case that makes gates cry wolf. The gate's exit status per comparison:
# 0 passed, 1 failed ("slower"), 4 inconclusive (not judged: too few samples, or a slowdown
# measured on a busy machine). Goals: at most 1 failure in 20 for quiet and hog; at least 19
# failures in 20 for planted. Prints one line per comparison and a closing count; the machine's
# load beside each, since other work than the hog makes these figures the machine's as much as
# the gate's.
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:?quiet, hog or planted}"
comparisons="${2:-20}"
threshold="${3:-10}"
rounds="${4:-2}"
case "$mode" in quiet | hog | planted) ;; *) echo "usage: $0 quiet|hog|planted [comparisons] [threshold] [rounds]" >&2; exit 2 ;; esac
ts=build/default/cli/trainscope
[ -x "$ts" ] || { echo "gate_false_alarms: build trainscope first (scripts/build default trainscope)" >&2; exit 2; }
work=$(mktemp -d)
hog_pid=""
stop_hog() { [ -n "$hog_pid" ] && kill "$hog_pid" 2>/dev/null && wait "$hog_pid" 2>/dev/null || true; hog_pid=""; }
trap 'stop_hog; rm -rf "$work"' EXIT
cp bench/gate_false_alarms.toml "$work/s.toml"

RANDOM=38  # the hog's coin: the same pattern on every invocation
one_run() {  # db, side
  local db=$1 side=$2 slow=() hogged=no
  if [ "$mode" = hog ] && [ $((RANDOM % 2)) -eq 1 ]; then
    # Bounded: the run takes seconds; the loop is killed when it ends, or after 10 minutes.
    timeout 600 sh -c 'while :; do :; done' &
    hog_pid=$!
    hogged=yes
  fi
  [ "$mode" = planted ] && [ "$side" = b ] && slow=(env "TS_TEST_SLOW_OP=*:0.2")
  "${slow[@]}" "$ts" suite "$work/s.toml" --db "$db" > "$work/last.log" 2>&1 ||
    { echo "gate_false_alarms: a run failed:" >&2; cat "$work/last.log" >&2; exit 2; }
  stop_hog
  printf '%s' "$side:$hogged "
}

passed=0; failed=0; inconclusive=0
echo "# $mode: $comparisons comparisons of $rounds rounds at a ${threshold}% threshold, $(nproc) cores; $(date -u +%FT%TZ)"
for i in $(seq "$comparisons"); do
  rm -f "$work"/a.db* "$work"/b.db*
  read -r load_before _ < /proc/loadavg
  printf 'comparison %2d: runs ' "$i"
  for r in $(seq "$rounds"); do
    if [ $((r % 2)) -eq 1 ]; then  # A B, then B A, ...
      one_run "$work/a.db" a; one_run "$work/b.db" b
    else
      one_run "$work/b.db" b; one_run "$work/a.db" a
    fi
  done
  set +e
  "$ts" compare "$work/a.db" "$work/b.db" --fail-on-regression "$threshold" --json "$work/c.json" > "$work/c.txt" 2>&1
  status=$?
  set -e
  change=$(python3 -c "import json,sys; p=json.load(open(sys.argv[1]))['pairs'][0]['metrics'][0]; \
print(f\"{p['delta']*100:+.1f}% [{p['delta_low']*100:+.1f}, {p['delta_high']*100:+.1f}] p={p['p_value']:.2g}\")" "$work/c.json")
  case $status in
    0) passed=$((passed + 1)); word=passed ;;
    1) failed=$((failed + 1)); word=FAILED ;;
    4) inconclusive=$((inconclusive + 1)); word=inconclusive ;;
    *) echo "gate_false_alarms: compare exited $status:" >&2; cat "$work/c.txt" >&2; exit 2 ;;
  esac
  echo "throughput $change -> $word (load at start $load_before)"
  # Why a comparison was not judged (a noisy run, and what made it so), or what failed it.
  [ "$status" -ne 0 ] && grep -E "^trainscope: (not judged|regression)|was noisy" "$work/c.txt" | sed 's/^/    /' | head -4 || true
done
echo "# $mode ($rounds rounds): $passed passed, $failed failed, $inconclusive inconclusive of $comparisons"
