#!/usr/bin/env bash
# trainscope against the best PyTorch on the CPU, interleaved (A B A B), in each workload's unit:
#   bench/pytorch/side_by_side.sh [WORKLOAD ... | all] [--preset small] [--iters 12] [--warmup 3]
#                                 [--threads 2] [--pairs 3] [--json FILE]
# side_by_side.py says how (a probe of every PyTorch variant, then pairs with the best one).
set -euo pipefail
exec python3 "$(dirname "$0")/side_by_side.py" "$@"
