# Sourced by the two-host drivers (ddp_hosts.sh, allreduce_hosts.sh): checks what they need, makes
# two namespace hosts tsh1 and tsh2 with a tbf shaper at $rate both ways (scripts/netns-hosts;
# root), removes them and the scratch folder $work when the driver exits, and sets
# over_hosts: the options that send trainscope's mpirun through them.
# Needs: $root (the project), $me (the driver's name), $trainscope, $python, $rate.
[ -x "$trainscope" ] || { echo "$me: no trainscope at $trainscope (build it: cmake --build --preset default)" >&2; exit 2; }
"$python" -c "import torch" 2>/dev/null ||
  { echo "$me: $python has no torch (pip install torch, or --python PY)" >&2; exit 2; }
if "$root/scripts/netns-hosts" status 2>/dev/null | grep -q '^tsh'; then
  echo "$me: namespace hosts exist already (someone's experiment); scripts/netns-hosts down frees them" >&2
  exit 2
fi
"$root/scripts/netns-hosts" up 2 --rate "$rate" >/dev/null
work=$(mktemp -d)
trap '"$root/scripts/netns-hosts" down >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
over_hosts=(--mca "plm_rsh_agent=$root/scripts/netns-rsh" --mca oob_tcp_if_include=10.99.0.0/24
            --mca btl_tcp_if_include=10.99.0.0/24)

# Runs `$python ARGS...` as the two ranks of a torch.distributed job, one on each host, rank 0's
# stdout into $work/rank0.out; fails (printing both ranks' logs) if either fails.
run_torch_pair() {
  local port=$((29500 + RANDOM % 1000)) pids=() r
  for r in 0 1; do
    ip netns exec "tsh$((r + 1))" env RANK=$r WORLD_SIZE=2 MASTER_ADDR=10.99.0.11 MASTER_PORT=$port \
      GLOO_SOCKET_IFNAME=eth0 "$python" "$@" >"$work/rank$r.out" 2>"$work/rank$r.log" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || { cat "$work"/rank*.log >&2; return 1; }; done
}
