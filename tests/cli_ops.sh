#!/bin/sh
# tools/overlap_sim on the cpu backend: user streams end to end, matmul_v2
# (gemm_overlap.sched, matmul.sched, --check-rows, --tf32), float16 and
# bfloat16 tolerances, 4 ranks, -q and -v.
src=${srcdir:-.}
. "$src/tests/lib.sh"

# User streams end to end (tests/schedules/user_streams.sched: `side` and
# `copy`, ordered by named events, beside calc and comm[0]): both forms run
# right, also under chaos; the trace, the picture, --op-times and the race
# report name the user streams.
us=$src/tests/schedules/user_streams.sched
for args in "-n 3 -w 1" "--chaos=1 -n 2 -w 0"; do
  if run 0 "user-streams $args" $args "$us" &&
    has out '^sync .* ok \(512 elements\); no races$' && has out '^async .* ok \(512 elements\); no races$' &&
    has out '^result: PASS$'
  then ok "user streams: sync and async PASS ($args)"; else ko "user streams: sync and async PASS ($args)"; fi
done
if run 0 user-streams-trace -n 3 -w 1 --trace="$tmp/us.json" --svg="$tmp/us.svg" "$us" &&
  [ "$(grep -o '"name":"thread_name","args":{"name":"side"}' "$tmp/us.json" | wc -l)" -eq 4 ] &&
  [ "$(grep -o '"name":"thread_name","args":{"name":"copy"}' "$tmp/us.json" | wc -l)" -eq 4 ] &&
  grep -q '"name":"scale","cat":"compute","args":{[^}]*"stream":"side"' "$tmp/us.json" &&
  grep -q '>r1 side<' "$tmp/us.svg" && grep -q '>r0 copy<' "$tmp/us.svg" &&
  json_ok trace "$tmp/us.json" 2 sync,async
then ok "user streams: --trace lanes (thread_name side, copy) and --svg lanes"; else ko "user streams: --trace lanes (thread_name side, copy) and --svg lanes"; fi
if run 0 user-streams-op-times --op-times -n 3 -w 1 "$us" &&
  has out '^sync +11  scale +side +1 +[0-9.]+ +[0-9.]+$' && has out '^async +11  scale +side +1 ' &&
  has out '^async +12  scale +copy +1 ' && has out '^async +19  c_allreduce_sum +comm\[0\] +1 '
then ok "user streams: --op-times rows name the stream"; else ko "user streams: --op-times rows name the stream"; fi
if run 4 side-race-json --races --json "$src/tests/schedules/side_race.sched" &&
  grep -q '"first":{"line":5,"col":5,"op":"scale","stream":"side","access":"write"}' "$tmp/out" &&
  grep -q '"second":{"line":6,"col":5,"op":"elementwise_add","stream":"calc","access":"read"}' "$tmp/out" &&
  grep -q '"fix":"insert event_record(b, event=b_ready, stream=side) and stream_wait_event(b, event=b_ready, stream=calc) before line 6","fix_checked":true' "$tmp/out" &&
  grep -q '"count":1' "$tmp/out" &&
  run 4 side-race --races "$src/tests/schedules/side_race.sched" &&
  has out '^  write  scale +.*side_race\.sched:5  side$'
then ok "user streams: --races --json gives \"stream\":\"side\""; else ko "user streams: --races --json gives \"stream\":\"side\""; fi

# matmul_v2 (issue 17): the GEMM schedules on the cpu backend.
if run 0 gemm-overlap --mode=all -n 2 -w 1 "$src/schedules/gemm_overlap.sched" &&
  has out 'hidden=64\* dtype=bfloat16' && has out '^comp ' && has out '^comm ' &&
  has out '^async .*n/a \(nothing fetched\); no races' &&
  has out '^ideal speedup: [0-9.]+x' && has out '^overlap efficiency: -?[0-9.]+' &&
  has out '^result: PASS$'
then ok "gemm_overlap.sched --mode=all"; else ko "gemm_overlap.sched --mode=all"; fi
# matmul.sched's 96 rows: 64 sampled (96 x 96 a rank: 6144 elements in 64
# rows, 3072 not checked), and all of them with --check-rows=all.
if run 0 matmul-sampled -n 2 -w 1 --mode=both "$src/schedules/matmul.sched" &&
  has out '^sync .* ok \(12288 elements in sampled rows; 6144 not checked\)' &&
  has out '^async .* ok \(12288 elements in sampled rows; 6144 not checked\)' &&
  run 0 matmul-all-rows -n 2 -w 1 --mode=async --check-rows=all "$src/schedules/matmul.sched" &&
  has out '^async .* ok \(18432 elements\)' &&
  run 0 matmul-8-rows -n 2 -w 1 --mode=async --check-rows=8 -D dtype=float32 "$src/schedules/matmul.sched" &&
  has out '^async .* ok \(1536 elements in sampled rows; 16896 not checked\)'
then ok "matmul.sched: sampled rows, --check-rows"; else ko "matmul.sched: sampled rows, --check-rows"; fi
if run 0 matmul-json -n 2 -w 1 --mode=async --json="$tmp/mm.json" "$src/schedules/matmul.sched" &&
  grep -q '"tf32": "off", "machine": null, "profile": null, "check_rows": 64' "$tmp/mm.json" &&
  grep -q '"status": "ok", "checked": 12288, "unchecked": 6144' "$tmp/mm.json" &&
  grep -q '"var": "out", "dtype": "bfloat16", .*"checked": 6144,' "$tmp/mm.json" &&
  run 0 matmul-json-all -n 2 -w 1 --mode=async --check-rows=all --json="$tmp/mm2.json" "$src/schedules/matmul.sched" &&
  grep -q '"check_rows": null' "$tmp/mm2.json" &&
  json_ok results "$tmp/mm.json" async
then ok "matmul.sched --json: tf32, check_rows, unchecked"; else ko "matmul.sched --json: tf32, check_rows, unchecked"; fi
if run 2 tf32-cpu --tf32=on -n 1 -w 0 "$src/schedules/matmul.sched" &&
  has err "^overlap_sim: backend 'cpu' has no TF32 matrix multiply" &&
  run 0 tf32-off-cpu --tf32=off -n 1 -w 0 --mode=async "$src/schedules/matmul.sched" &&
  has out '^result: PASS$' && "$tool" --help | grep -q -- '--tf32=on|off' &&
  "$tool" --help | grep -q -- '--check-rows=N|all'
then ok "--tf32 on cpu, --help"; else ko "--tf32 on cpu, --help"; fi
# float16 and bfloat16: the seed passes in each with 12 steps (64 would
# overflow float16's range, 65504, and a fetched infinity fails) (per-dtype tolerances, in
# the JSON per variable; options.rtol and atol null for the defaults); a
# mismatch names its dtype's tolerance, and each dtype's when they differ.
for dt in float16 bfloat16; do
  sed "s/dtype=float32/dtype=$dt/" "$src/schedules/seed.sched" >"$tmp/seed_$dt.sched"
  [ $dt = float16 ] && r=0.002 || r=0.016
  if run 0 "seed-$dt" -n 2 -w 1 -D cols=10 -D steps=12 --json="$tmp/$dt.json" "$tmp/seed_$dt.sched" &&
    has out '^sync .* ok \(' && has out '^async .* ok \(' && has out '^result: PASS$' &&
    grep -q "\"dtype\": \"$dt\", \"rtol\": $r, \"atol\": 1.0000000000000001e-05" "$tmp/$dt.json" &&
    grep -q '"rtol": null, "atol": null' "$tmp/$dt.json" &&
    json_ok results "$tmp/$dt.json" sync,async
  then ok "seed in $dt"; else ko "seed in $dt"; fi
done
sed 's/dtype=float32/dtype=float16/' "$src/schedules/bad/missing_wait_compute.sched" >"$tmp/mwc16.sched"
if run_racy 1 mismatch-float16 -n 2 -w 0 --mode=async "$tmp/mwc16.sched" &&
  has out '^result: FAIL: numeric mismatch \(tolerance \|got-ref\| <= 1e-05 \+ 0\.002 \* \|ref\|\), and races$'
then ok "a float16 mismatch names float16's tolerance"; else ko "a float16 mismatch names float16's tolerance"; fi
if run_racy 1 mismatch-float16-given -n 2 -w 0 --mode=async --rtol=0.25 "$tmp/mwc16.sched" &&
  has out '^result: FAIL: numeric mismatch \(tolerance \|got-ref\| <= 1e-05 \+ 0\.25 \* \|ref\|\), and races$'
then ok "--rtol given, --atol per dtype"; else ko "--rtol given, --atol per dtype"; fi
printf '%s\n' 'x = data(shape=[64], dtype=float32, init=uniform, seed=7)' \
  'y = data(shape=[64], dtype=bfloat16, init=uniform, seed=8)' \
  'delay(us=20000, stream=calc)' 'c = scale(x, scale=3.0)' 'd = scale(y, scale=3.0)' \
  'c_allreduce_sum(c, ring_id=0)' 'c_allreduce_sum(d, ring_id=0)' \
  'c_wait_comm(c, d, ring_id=0)' 'fetch(c, d)' >"$tmp/mixed.sched"
if run_racy 1 mismatch-mixed -n 2 -w 0 --mode=async "$tmp/mixed.sched" &&
  has out '^result: FAIL: numeric mismatch \(tolerance \|got-ref\| <= atol \+ rtol \* \|ref\|: float32 1e-06 \+ 1e-05, bfloat16 1e-05 \+ 0\.016\), and races$'
then ok "mismatches of two dtypes name each tolerance"; else ko "mismatches of two dtypes name each tolerance"; fi

# More ranks on 3 and 4 ranks still pass.
if run 0 ranks4 --ranks=4 -n 2 -w 1 -D cols=10 && has out '4 ranks' && has out '^result: PASS$'
then ok "--ranks=4"; else ko "--ranks=4"; fi

# -q prints only the verdict.
if run 0 quiet -q -n 2 -w 1 -D cols=10 && [ "$(wc -l <"$tmp/out")" -eq 1 ] && has out '^result: PASS$'
then ok "-q"; else ko "-q"; fi
# -v prints the iterations.
if run 0 verbose -v -n 2 -w 1 -D cols=10 && has out 'iterations \(ms\): [0-9.]+ [0-9.]+$'
then ok "-v"; else ko "-v"; fi

finish
