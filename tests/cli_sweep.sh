#!/bin/sh
# End-to-end tests of tools/overlap_sweep on the cpu backend: help and
# version, usage errors (exit 2, naming the flag), a small sweep of every
# collective (every row checked and right), the table's shape, --csv, and
# busbw = algbw x nccl-tests' factor.
set -u

sweep=${OVL_SWEEP:-${OVL_BUILDDIR:-.}/tools/overlap_sweep}
sim=${OVL_TOOL:-${OVL_BUILDDIR:-.}/tools/overlap_sim}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ovl-sweep.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT INT TERM
pass=0
fail=0

ok() { pass=$((pass + 1)); echo "PASS: $1"; }
ko() { fail=$((fail + 1)); echo "FAIL: $1"; sed 's/^/    | /' "$tmp/out" "$tmp/err" | head -40; }

# run EXPECTED_EXIT ARGS...: the sweep on the cpu backend, short runs.
run() {
  want=$1
  shift
  "$sweep" --backend=cpu "$@" >"$tmp/out" 2>"$tmp/err"
  got=$?
  if [ "$got" -eq "$want" ]; then return 0; fi
  echo "    exit $got, expected $want"
  return 1
}
has() { grep -Eq -- "$2" "$tmp/$1"; }
# The table's rows: lines that are not comments.
rows() { grep -v '^#' "$tmp/out"; }

# --help and --version
if "$sweep" --help >"$tmp/out" 2>"$tmp/err" && has out '^Usage: overlap_sweep' &&
  has out '--collective=NAME' && has out '--csv' && has out 'Exit status'
then ok "--help"; else ko "--help"; fi
# The flags both tools take are one table (tools/common_flags.c): the rows
# whose text is the table's read the same in both --help, each at its
# tool's column (overlap_sweep takes no -b or -r: nccl-tests' letters).
# shared_rows TOOL: those rows, one a line, blanks squeezed, sorted.
shared_rows() {
  "$1" --help | awk '
    function put() { if (row != "") print row; row = "" }
    /^  (-[A-Za-z], |    )--/ {
      put()
      if ($0 ~ /--(backend|ranks|gpus-per-process|timeout|rtol|atol|comm-priority|nccl-min-ctas|help|version)([=, ]|$)/)
        row = $0
      next
    }
    /^       / { if (row != "") row = row " " $0; next }
    { put() }
    END { put() }' | sed -e 's/^  -[br], /      /' -e 's/  */ /g' | LC_ALL=C sort
}
if shared_rows "$sweep" >"$tmp/sweep_rows" && shared_rows "$sim" >"$tmp/sim_rows" &&
  [ "$(wc -l <"$tmp/sim_rows")" -eq 10 ] && cmp -s "$tmp/sweep_rows" "$tmp/sim_rows"
then ok "--help: the shared flags' rows as overlap_sim's"
else diff "$tmp/sim_rows" "$tmp/sweep_rows" | sed 's/^/    /'; ko "--help: the shared flags' rows as overlap_sim's"; fi
if "$sweep" --version >"$tmp/out" 2>"$tmp/err" &&
  has out '^overlap_sweep \(overlap-sim\) [0-9]+\.[0-9]+\.[0-9]+$'
then ok "--version"; else ko "--version"; fi

# Usage errors: exit 2, the flag named on stderr, nothing on stdout.
bad() {
  flag=$1
  shift
  if run 2 "$@" && has err "$flag" && [ ! -s "$tmp/out" ]; then
    ok "usage error: $*"
  else
    ko "usage error: $* (want exit 2 naming $flag)"
  fi
}
bad "'--bogus'" --bogus
bad "--collective: unknown collective 'gather'" -c gather
bad "--op: sendrecv does not reduce" -c sendrecv -o sum
bad "--root: only broadcast and reduce have a root" -c alltoall --root=1
bad "--op: unknown reduction 'avg'" -o avg
bad "--op: reducescatter has sum only" -c reducescatter -o max
bad "--op: broadcast does not reduce" -c broadcast -o sum
bad "--datatype: unknown type 'int8' \(float32, float64, float16, bfloat16\)" -d int8
bad "--minbytes: '0' is not a size" -b 0
bad "--minbytes: '1X' is not a size" -b 1X
bad "--maxbytes: 'K' is not a size" -e K
bad "--minbytes \(2048\) is larger than --maxbytes \(1024\)" -b 2K -e 1K
bad "--stepfactor: '1' is not a factor" -f 1
bad "--sizes: 'x' is not a size" --sizes=1K,x
bad "--sizes excludes" --sizes=1K -b 1K
bad "--iters: '0'" -n 0
bad "--warmup: '-1'" -w -1
bad "--reps: 'many'" --reps=many
bad "--compute-bytes: '2' is not a size" --compute-bytes=2
bad "--compute: 'gemm' is not scale or matmul" --compute=gemm
bad "--matmul-size needs --compute=matmul" --matmul-size=64
bad "--matmul-size: '0' is not a number from 1 to 65536" --compute=matmul --matmul-size=0
bad "--compute-bytes sizes scale's buffers" --compute=matmul --compute-bytes=1M
bad "--tf32: 'yes' is not on or off" --tf32=yes
bad "--nccl-min-ctas \(8\) is larger than --nccl-max-ctas \(4\)" --nccl-min-ctas=8 --nccl-max-ctas=4
bad "unknown option '-r'" -r 2
bad "--timing: 'wall'" --timing=wall
bad "--root: only broadcast" --root=1
bad "--root: 2 is not a rank \(0 to 1\)" -c broadcast --root=2 --ranks=2
bad "--backend: unknown backend 'gpu'" --backend=gpu
bad "--ranks: '0'" --ranks=0
bad "option '-c' needs a value" -c
bad "unexpected argument 'x.sched'" x.sched
bad "^overlap_sweep: --graph: the cpu backend has no graphs \(CUDA graphs need --backend=cuda or auto with a GPU\)$" --graph -b 1K -e 1K
# auto where no GPU is visible picks cpu, which has no graphs.
CUDA_VISIBLE_DEVICES= "$sweep" --backend=auto --graph -b 1K -e 1K -n 1 -w 0 >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ "$rc" -eq 2 ] && [ ! -s "$tmp/out" ] &&
  has err '^overlap_sweep: --graph: the cpu backend has no graphs \(CUDA graphs need the cuda backend: a GPU, or --backend=cuda\)$'
then ok "--graph refused where auto picks cpu"; else echo "    exit $rc, expected 2"; ko "--graph refused where auto picks cpu"; fi

# A small sweep of each collective: 1K to 16K by 2 is 5 rows of 23 columns
# (size count type redop root, 4 x (time algbw busbw #wrong): on calc, on
# comm out of place, in place, with compute beside; 2 slowdowns); every
# #wrong is 0; the verdict is PASS. Allreduce, broadcast and reduce have an
# in-place group (nccl-tests' second); allgather, reducescatter, alltoall
# and sendrecv n/a.
for c in allreduce broadcast allgather reducescatter reduce alltoall sendrecv; do
  case $c in allreduce|broadcast|reduce) inplace=0 ;; *) inplace=n/a ;; esac
  if run 0 -c "$c" -b 1K -e 16K -n 1 -w 0 &&
    has out "^# overlap_sweep .*: $c, backend cpu, 2 ranks" &&
    has out '^# time: host clock as each emulated stream reaches the op, per collective' &&
    ! has out 'device clock' && has out '^#.*#wrong.*kernel +coll$' &&
    has out '^# +on the calc stream +on a comm stream +in place, on a comm stream +comm stream, compute beside +slowdown$' &&
    [ "$(rows | wc -l)" -eq 5 ] &&
    rows | awk 'NF != 23 { exit 1 }' &&
    rows | awk -v ip="$inplace" '$9 != "0" || $13 != "0" || $17 != ip || $21 != "0" { exit 1 }' &&
    rows | awk '$3 != "float" { exit 1 }' &&
    has out '^# Avg bus bandwidth    : [0-9.e+-]+ $' &&
    has out '^# result: PASS$'
  then ok "$c sweep: 5 rows, 23 columns, #wrong 0, in place $inplace"; else ko "$c sweep: 5 rows, 23 columns, #wrong 0, in place $inplace"; fi
done
# The footer is nccl-tests' average: the busbw of every out-of-place (on a
# comm stream) and in-place measurement, from the table (2 decimals).
if run 0 -b 1K -e 8K -n 1 -w 0 && has out '^# float32 sum, out of place \(y = c_allreduce_sum\(x\)\) and in place \(c_allreduce_sum\(x\)\);' &&
  awk '!/^#/ { s += $12 + $16; n += 2 }
    /^# Avg bus bandwidth/ { avg = $NF }
    END { d = s / n - avg; if (d < 0) d = -d; if (n != 8 || d > 0.006) exit 1 }' "$tmp/out" &&
  run 0 -c allgather -b 1K -e 4K -n 1 -w 0 && has out 'allgather has no in-place form here: n/a' &&
  awk '!/^#/ { s += $12; n++ } /^# Avg bus bandwidth/ { avg = $NF }
    END { d = s / n - avg; if (d < 0) d = -d; if (n != 3 || d > 0.006) exit 1 }' "$tmp/out"
then ok "# Avg bus bandwidth: the mean busbw of the out-of-place and in-place groups"; else ko "# Avg bus bandwidth: the mean busbw of the out-of-place and in-place groups"; fi

# --compute=matmul: a GEMM beside the collective, in the header and the
# table; every row checked; bfloat16 too. The cpu backend has no TF32.
if run 0 --compute=matmul --matmul-size=48 -b 1K -e 4K -n 2 -w 1 &&
  has out '^# compute beside: kernels w = matmul_v2\(a, b\) on the calc stream, a, b and w 48 x 48 of float32 \(about [0-9.]+ us a kernel alone, [0-9.e+-]+ TFLOP/s\)' &&
  [ "$(rows | wc -l)" -eq 3 ] && rows | awk 'NF != 23 || $9 != "0" || $13 != "0" || $17 != "0" || $21 != "0" { exit 1 }' &&
  has out '^# result: PASS$' &&
  run 0 --compute=matmul -d bfloat16 --sizes=2K -n 1 -w 0 --csv &&
  [ "$(grep -c . "$tmp/out")" -eq 2 ] &&
  awk -F, 'NR == 2 && ($3 != "bfloat16" || $13 != "0" || $19 != "0" || $25 != "0" || $31 != "0" || $34 <= 0 || $35 <= 0) { exit 1 }' "$tmp/out" &&
  run 2 --tf32=on --sizes=1K -n 1 -w 0 && has err "backend 'cpu' has no TF32" &&
  "$sweep" --help | grep -q -- '--compute=scale|matmul'
then ok "--compute=matmul (GEMM beside the collective), bfloat16, --csv, --tf32 on cpu"; else ko "--compute=matmul (GEMM beside the collective), bfloat16, --csv, --tf32 on cpu"; fi

# Sizes as nccl-tests counts them: allgather's size is the receive buffer
# (count = one rank's share, rounded down to 16 bytes), reducescatter's the
# send buffer; allreduce's the buffer.
if run 0 -c allgather --ranks=3 --sizes=1K -n 1 -w 0 && rows | awk '$1 != 1008 || $2 != 84 || $4 != "none" { exit 1 }'
then ok "allgather size and count (3 ranks)"; else ko "allgather size and count (3 ranks)"; fi
if run 0 -c allreduce -d float64 -o prod --sizes=1K,3000 -n 1 -w 0 &&
  rows | awk 'NR == 1 && ($1 != 1024 || $2 != 128 || $3 != "double" || $4 != "prod") { exit 1 }
              NR == 2 && ($1 != 3000 || $2 != 375) { exit 1 }'
then ok "--sizes, float64, prod"; else ko "--sizes, float64, prod"; fi
# The 16-bit dtypes, nccl-tests' type names; a sum of 2 ranks is the
# reference's bit for bit (--rtol=0 --atol=0), every placement.
if run 0 -c allreduce -d bfloat16 --sizes=4K -n 1 -w 0 --rtol=0 --atol=0 &&
  rows | awk '$1 != 4096 || $2 != 2048 || $3 != "bfloat16" || $9 != 0 || $13 != 0 || $17 != 0 || $21 != 0 { exit 1 }'
then ok "bfloat16, exact"; else ko "bfloat16, exact"; fi
if run 0 -c reducescatter -d half --sizes=4K -n 1 -w 0 --rtol=0 --atol=0 &&
  run 0 -c reducescatter -d float16 --sizes=4K -n 1 -w 0 --rtol=0 --atol=0 &&
  rows | awk '$1 != 4096 || $2 != 1024 || $3 != "half" || $9 != 0 || $13 != 0 || $17 != "n/a" || $21 != 0 { exit 1 }'
then ok "float16 (half), exact"; else ko "float16 (half), exact"; fi
if run 0 -c broadcast --root=1 --sizes=2K -n 1 -w 0 && rows | awk '$5 != 1 { exit 1 }'
then ok "broadcast --root in the root column"; else ko "broadcast --root in the root column"; fi
# reduce: to --root (only the root's output is checked), max; alltoall on 3
# ranks: size and count as nccl-tests (count = one part, rounded down to 16
# bytes); sendrecv on 3 ranks: busbw = algbw.
if run 0 -c reduce -o max --root=2 --ranks=3 --sizes=4K -n 1 -w 0 &&
  rows | awk '$4 != "max" || $5 != 2 || $9 != "0" || $13 != "0" { exit 1 }'
then ok "reduce --root=2 -o max on 3 ranks, checked"; else ko "reduce --root=2 -o max on 3 ranks, checked"; fi
if run 0 -c alltoall --ranks=3 --sizes=1K -n 1 -w 0 &&
  rows | awk '$1 != 1008 || $2 != 84 || $9 != "0" { exit 1 }'
then ok "alltoall size and count (3 ranks)"; else ko "alltoall size and count (3 ranks)"; fi
if run 0 -c sendrecv --ranks=3 --sizes=8K -n 1 -w 0 &&
  has out '^# algbw = size / time; busbw = algbw x 1 \(1\)$' &&
  rows | awk '$7 != $8 || $9 != "0" { exit 1 }'
then ok "sendrecv on 3 ranks: busbw = algbw, checked"; else ko "sendrecv on 3 ranks: busbw = algbw, checked"; fi

# -q: the rows only.
if run 0 -q -b 1K -e 2K -n 1 -w 0 && ! has out '^#' && [ "$(wc -l <"$tmp/out")" -eq 2 ]
then ok "-q prints the rows only"; else ko "-q prints the rows only"; fi

# --csv: a header line and one line a row, every line with the header's
# number of fields, numbers where numbers belong; reducescatter's in-place
# fields (22 to 27) empty, allreduce's numbers.
if run 0 --csv -c reducescatter -b 1K -e 4K -n 1 -w 0 &&
  head -n 1 "$tmp/out" | grep -q '^size,count,type,redop,root,ranks,reps,kernels,timing,calc_time_us,.*,comm_host_us,inplace_time_us,inplace_algbw,inplace_busbw,inplace_wrong,inplace_device_us,inplace_host_us,both_time_us,' &&
  [ "$(wc -l <"$tmp/out")" -eq 4 ] &&
  awk -F, 'NR == 1 { n = NF; next }
    NF != n || $1 !~ /^[0-9]+$/ || $9 != "device" || $13 != "0" || $19 != "0" || $31 != "0" { exit 1 }
    { for (i = 10; i <= NF; i++)
        if (i >= 22 && i <= 27) { if ($i != "") exit 1 }
        else if (i != 13 && i != 19 && i != 31 && $i !~ /^[0-9.e+-]+$/) exit 1 }' "$tmp/out" &&
  run 0 --csv -c allreduce --sizes=1K -n 1 -w 0 &&
  awk -F, 'NR == 2 { if ($25 != "0") exit 1; for (i = 22; i <= 27; i++) if (i != 25 && $i !~ /^[0-9.e+-]+$/) exit 1 }' "$tmp/out"
then ok "--csv well-formed"; else ko "--csv well-formed"; fi

# busbw = algbw x factor: allreduce 2(n-1)/n, allgather (n-1)/n, with 3
# ranks; from the table (2 decimals: within rounding) and from --csv.
busbw_table() { # COLLECTIVE FACTOR
  run 0 -c "$1" --ranks=3 --sizes=8K -n 1 -w 0 &&
    rows | awk -v f="$2" '{
      for (i = 7; i <= 19; i += 4) {
        if ($i == "n/a") continue
        d = $(i + 1) - $i * f; if (d < 0) d = -d
        if ($i <= 0 || d > 0.015) exit 1
      } }'
}
if busbw_table allreduce 1.3333333; then ok "allreduce busbw = algbw x 2(n-1)/n (table)"; else ko "allreduce busbw = algbw x 2(n-1)/n (table)"; fi
if busbw_table allgather 0.6666667; then ok "allgather busbw = algbw x (n-1)/n (table)"; else ko "allgather busbw = algbw x (n-1)/n (table)"; fi
if run 0 --csv -c allreduce --ranks=3 --sizes=8K -n 1 -w 0 &&
  awk -F, 'NR == 2 { r = $12 / $11; if (r < 1.33323 || r > 1.33343) exit 1
                     t = 8192 / ($10 * 1e-6) / 1e9; d = $11 / t - 1; if (d < -1e-4 || d > 1e-4) exit 1 }' "$tmp/out"
then ok "allreduce busbw and algbw = size / time (csv)"; else ko "allreduce busbw and algbw = size / time (csv)"; fi

# A timeout while kernels still run: exit 3 with the timeout message, no
# crash (issue 10: a use-after-free under ASan). The emulated backend's
# timeout is a stall detector (no command finished for that long; a
# collective whose ranks all arrived is not stalled), so a long collective
# alone does not time out on a machine of many fast cores (64 MiB did not,
# on 16). A 64 MiB compute kernel is one command that takes far over 1 ms
# on any machine: the first measurement of the row (kernels alone) times
# out.
if run 3 -n 1 -w 0 --timeout=0.001 --sizes=64M --compute-bytes=64M &&
  has err 'kernel-alone>: at the end of an iteration: rank [01]: calc stream: sync timed out after'
then ok "a timeout mid-sweep ends cleanly"; else ko "a timeout mid-sweep ends cleanly"; fi

# --timing=host says so, in the header and in --csv.
if run 0 --timing=host --sizes=1K -n 1 -w 0 && has out '^# time: host clock'
then ok "--timing=host header"; else ko "--timing=host header"; fi

# A write error on stdout (the table lost) is exit 3, for a sweep and for
# --help; a usage error stays exit 2.
if [ -c /dev/full ]; then
  for args in "--backend=cpu -b 1K -e 1K -n 1 -w 0" "--backend=cpu --csv --sizes=1K -n 1 -w 0" "--help"; do
    # shellcheck disable=SC2086 # split on blanks on purpose
    "$sweep" $args >/dev/full 2>"$tmp/err"
    got=$?
    : >"$tmp/out"
    if [ "$got" -eq 3 ] && [ "$(grep -c '^overlap_sweep: write error on standard output: No space left on device$' "$tmp/err")" -eq 1 ]
    then ok "stdout on /dev/full: $args: exit 3"; else echo "    exit $got"; ko "stdout on /dev/full: $args: exit 3"; fi
  done
  "$sweep" --bogus >/dev/full 2>"$tmp/err"
  got=$?
  if [ "$got" -eq 2 ]; then ok "stdout on /dev/full: a usage error stays exit 2"; else ko "stdout on /dev/full: a usage error stays exit 2"; fi
else
  echo "SKIP: stdout on /dev/full (no /dev/full)"
fi

echo "cli_sweep.sh: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
