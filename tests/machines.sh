#!/bin/sh
# The machine files shipped in machines/ (docs/MODEL.md, "Machine files"):
# each loads and runs the seed on the model backend, names itself in the
# header, and says where its figures come from (a "sources" array of
# strings); and the built-in default machine is machines/h200-8x400g.json:
# a run with that file prints what a run without --machine prints, for the
# seed and for a schedule that prices every key of a machine file (kernels
# of every dtype, a delay, small and large collectives, point-to-point,
# waits, a fetch, host syncs), on one node and on two, eager and as
# graphs, with op times.
src=${srcdir:-.}
. "$src/tests/lib.sh"

machines="h200x1 h200x2 h200-8x400g"

# model NAME ARGS...: the tool on the model backend, stdout and stderr in
# $tmp/NAME.out; its exit status.
model() {
  model_name=$1
  shift
  "$tool" --backend=model "$@" >"$tmp/$model_name.out" 2>&1
}

# --- Every shipped machine file loads and runs -------------------------------
for m in $machines; do
  f=$src/machines/$m.json
  : >"$tmp/why"
  if [ ! -f "$f" ]; then
    echo "no $f" >"$tmp/why"
  elif ! model "$m" --machine="$f" -r 2 -n 1 -w 0 "$src/schedules/seed.sched"; then
    echo "exit $? (expected 0):" >"$tmp/why"
    cat "$tmp/$m.out" >>"$tmp/why"
  elif ! grep -q "^overlap_sim .*: backend model, 2 ranks (2 x NVIDIA H200 (model of $m)), " "$tmp/$m.out"; then
    echo "the header does not name the machine '$m':" >"$tmp/why"
    head -1 "$tmp/$m.out" >>"$tmp/why"
  elif ! grep -q '^result: PASS$' "$tmp/$m.out"; then
    echo "no 'result: PASS':" >"$tmp/why"
    cat "$tmp/$m.out" >>"$tmp/why"
  fi
  if [ ! -s "$tmp/why" ]; then ok "machines/$m.json loads and runs the seed"
  else ko "machines/$m.json loads and runs the seed"; fi
done

# Every machine file in machines/ is one of those (a new one is added to
# the list above, and to Makefile.am).
: >"$tmp/why"
for f in "$src"/machines/*.json; do
  m=${f##*/}
  m=${m%.json}
  case " $machines " in *" $m "*) ;; *) echo "machines/$m.json is not in tests/machines.sh's list" >>"$tmp/why" ;; esac
done
if [ ! -s "$tmp/why" ]; then ok "every file of machines/ is tested"
else ko "every file of machines/ is tested"; fi

# Each says where its figures come from: "sources", an array of strings,
# not empty (python3 reads the JSON; without it, grep).
: >"$tmp/why"
for m in $machines; do
  f=$src/machines/$m.json
  if [ "$have_python" -eq 1 ]; then
    python3 - "$f" >>"$tmp/why" 2>&1 <<'EOF' || echo "$f: no sources" >>"$tmp/why"
import json, sys
m = json.load(open(sys.argv[1]))
s = m.get("sources")
ok = isinstance(s, list) and s and all(isinstance(x, str) and x for x in s)
sys.exit(0 if ok else 1)
EOF
  else
    grep -q '"sources": \[' "$f" || echo "$f: no sources" >>"$tmp/why"
  fi
done
if [ ! -s "$tmp/why" ]; then ok "every machine file has its sources"
else ko "every machine file has its sources"; fi

# --- The built-in default is machines/h200-8x400g.json -----------------------
cat >"$tmp/every_key.sched" <<'EOF'
# Prices every key of a machine file: host costs of each primitive (the
# point-to-point first, on an idle comm stream), the device's rates per
# dtype and its floor, collectives in both regimes (on two nodes with
# -r 16), point-to-point within a node and across, matmuls and memory-bound
# kernels beside collectives, waits, a fetch and host syncs.
param n = 1000
x = data(shape=[n], dtype=float32, init=uniform, seed=1)
big = data(shape=[4194304], dtype=float32, init=fill, value=1.0)
p = data(shape=[8 * nranks], dtype=float32, init=fill, value=1.0)
a32 = data(shape=[1024, 1024], dtype=float32, init=uniform, seed=2)
a64 = data(shape=[1024, 1024], dtype=float64, init=uniform, seed=3)
a16 = data(shape=[1024, 1024], dtype=float16, init=uniform, seed=4)
abf = data(shape=[1024, 1024], dtype=bfloat16, init=uniform, seed=5)
group {
  send_v2(x, peer=rank + 1, ring_id=0, ranks=[0:nranks - 1])
  r = recv_v2(peer=rank - 1, out_shape=[n], ring_id=0, ranks=[1:nranks])
}
y = scale(x, scale=2.0)
v = elementwise_add(big, big)
delay(us=5, stream=calc)
c_wait_compute(y, v, ring_id=0)
c_allreduce_sum(y, ring_id=0)
c_allreduce_sum(big, ring_id=0)
g = c_allgather(x, ring_id=0)
t = alltoall(p, ring_id=0)
m32 = matmul_v2(a32, a32)
m64 = matmul_v2(a64, a64)
m16 = matmul_v2(a16, a16)
mbf = matmul_v2(abf, abf)
w = scale(v, scale=0.5)
c_wait_comm(y, big, g, t, r, ring_id=0)
fetch(y)
c_sync_calc_stream(m32, m64, m16, mbf, w)
EOF
: >"$tmp/why"
for run in "seed.sched -r 2" "seed.sched -r 16" "every_key.sched -r 2" \
  "every_key.sched -r 8" "every_key.sched -r 16" \
  "every_key.sched -r 16 --graph"; do
  set -- $run
  s=$1
  shift
  case $s in every_key.sched) s=$tmp/$s ;; *) s=$src/schedules/$s ;; esac
  model builtin --mode=all --op-times -n 1 -w 0 "$@" "$s"
  st1=$?
  model file --machine="$src/machines/h200-8x400g.json" --mode=all --op-times -n 1 -w 0 "$@" "$s"
  st2=$?
  # Everything but the line that says where the machine came from.
  grep -v '^  model: predicted' "$tmp/builtin.out" >"$tmp/builtin.cmp"
  grep -v '^  model: predicted' "$tmp/file.out" >"$tmp/file.cmp"
  if [ "$st1" -ne 0 ] || [ "$st2" -ne 0 ]; then
    echo "$run: exit $st1 without --machine, $st2 with it" >>"$tmp/why"
    cat "$tmp/builtin.out" "$tmp/file.out" >>"$tmp/why"
  elif ! grep -q '^  model: predicted, nothing runs: machine h200-8x400g (built in)' "$tmp/builtin.out" ||
    ! grep -q '^  model: predicted, nothing runs: machine h200-8x400g (.*machines/h200-8x400g\.json)' "$tmp/file.out"; then
    echo "$run: the model line does not name the machine (built in / the file)" >>"$tmp/why"
    grep '^  model:' "$tmp/builtin.out" "$tmp/file.out" >>"$tmp/why"
  elif ! cmp -s "$tmp/builtin.cmp" "$tmp/file.cmp"; then
    echo "$run: the output differs (< built in, > machines/h200-8x400g.json):" >>"$tmp/why"
    diff "$tmp/builtin.cmp" "$tmp/file.cmp" | head -10 >>"$tmp/why"
  elif ! grep -q '^async ' "$tmp/file.out"; then
    echo "$run: no table:" >>"$tmp/why"
    cat "$tmp/file.out" >>"$tmp/why"
  fi
done
if [ ! -s "$tmp/why" ]; then ok "the built-in machine is machines/h200-8x400g.json"
else ko "the built-in machine is machines/h200-8x400g.json"; fi

# And the file is not the only thing the runs read: another machine gives
# other times (the comparison above would pass if --machine were ignored).
if model builtin --mode=async -n 1 -w 0 -r 2 "$src/schedules/seed.sched" &&
  model file --machine="$src/machines/h200x2.json" --mode=async -n 1 -w 0 -r 2 "$src/schedules/seed.sched" &&
  ! cmp -s "$tmp/builtin.out" "$tmp/file.out"
then ok "another machine file gives other times"
else
  echo "machines/h200x2.json printed what the built-in machine prints" >"$tmp/why"
  ko "another machine file gives other times"
fi

finish
