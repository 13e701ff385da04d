#!/usr/bin/env python3
"""gemm_overlap_torch.py: schedules/gemm_overlap.sched's step in PyTorch.

The same step as overlap-sim runs it, so that the two can be timed side by
side on one machine (docs/MATMUL.md, "The schedules"; the figures:
docs/RESULTS.md). One process per GPU (torch.multiprocessing, a NCCL process
group); per step, for each of --layers layers:

    dw[l] = x^T @ dy               x [2H, H/2], dy [2H, H] (H = --hidden):
                                   dw [H/2, H], 2 H^3 FLOP, H^2 bytes (bf16)
    comm.wait_stream(calc)         c_wait_compute
    with comm: all_reduce(dw[l])   the collective, issued on the comm
                                   stream (ProcessGroupNCCL's own stream
                                   waits on it; work.wait() makes it wait
                                   for the collective)

then calc.wait_stream(comm) (c_wait_comm). The four forms overlap_sim
--mode=all runs: sync (the allreduces on calc), async (as above), comp
(the matmuls only), comm (the allreduces only). Each iteration starts
after a host barrier (gloo) with every device idle and ends when every
stream of the rank is drained; an iteration's time is the slowest rank's.
Prints the table and the figures overlap_sim prints (speedup, ideal
speedup, overlap efficiency), and the matmul's TFLOP/s in comp form.

--issue-step runs the issue's original reference step instead: a square
H^3 matmul and, beside it, the allreduce of a separate --bucket-mb bucket.
--matmul-only times torch.matmul alone on GPU 0 (no process group): a
square --matmul-size^3 product and the step's x^T @ dy, in TFLOP/s.

Knobs, as overlap_sim's: --comm-priority=high (ProcessGroupNCCL's
is_high_priority_stream), --nccl-max-ctas=N (NCCL_MAX_CTAS). Products are
summed in float32 (allow_bf16_reduced_precision_reduction and its fp16
twin off, as overlap-sim's cuBLAS calls; --reduced-precision turns them
on); float32 does not use TF32 unless --tf32.

Not part of the build; needs PyTorch with CUDA and NCCL.
"""
import argparse
import os
import socket
import statistics
import sys
import time

try:
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
except ImportError as e:  # pragma: no cover
    sys.exit("gemm_overlap_torch.py: needs PyTorch (%s)" % e)

DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16,
          "float32": torch.float32, "float64": torch.float64}


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description="schedules/gemm_overlap.sched's step in PyTorch "
                    "(see the file's docstring)")
    p.add_argument("--hidden", type=int, default=8192,
                   help="H (default 8192: 1.1 TFLOP matmuls, 64 MiB "
                        "gradients in bfloat16)")
    p.add_argument("--layers", type=int, default=16)
    p.add_argument("--dtype", default="bfloat16", choices=sorted(DTYPES))
    p.add_argument("--iters", type=int, default=10,
                   help="iterations in all (default 10, as overlap_sim)")
    p.add_argument("--warmup", type=int, default=2,
                   help="untimed iterations first (default 2)")
    p.add_argument("--mode", default="all",
                   choices=["all", "both", "sync", "async", "comp", "comm"])
    p.add_argument("--ranks", type=int, default=0,
                   help="processes, one GPU each (default: every GPU)")
    p.add_argument("--comm-priority", default="default",
                   choices=["default", "high"])
    p.add_argument("--nccl-max-ctas", type=int, default=0,
                   help="NCCL_MAX_CTAS (0: NCCL's choice)")
    p.add_argument("--tf32", action="store_true",
                   help="float32 matmuls on TF32 tensor cores")
    p.add_argument("--reduced-precision", action="store_true",
                   help="let cuBLAS reduce split-K partial sums in 16 bits "
                        "(PyTorch's default; off here, as in overlap-sim)")
    p.add_argument("--issue-step", action="store_true",
                   help="the issue's step: a square H^3 matmul and the "
                        "allreduce of a separate bucket")
    p.add_argument("--bucket-mb", type=int, default=64,
                   help="--issue-step's bucket, MiB (default 64)")
    p.add_argument("--matmul-only", action="store_true",
                   help="time torch.matmul alone on GPU 0 and exit")
    p.add_argument("--matmul-size", type=int, default=8192,
                   help="--matmul-only's square size (default 8192)")
    a = p.parse_args(argv)
    if a.hidden < 2 or a.hidden % 2:
        p.error("--hidden must be even and >= 2")
    if a.layers < 1 or a.iters < 1 or not 0 <= a.warmup < a.iters:
        p.error("need --layers >= 1, --iters >= 1, 0 <= --warmup < --iters")
    return a


def set_math(a):
    torch.backends.cuda.matmul.allow_tf32 = a.tf32
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = \
        a.reduced_precision
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = \
        a.reduced_precision


def time_matmul(a_, b_, reps, transpose_a=False):
    """Mean seconds of torch.matmul(a_ (or a_^T), b_) over reps, on the
    current stream, with CUDA events."""
    out = torch.empty(a_.shape[1] if transpose_a else a_.shape[0],
                      b_.shape[1], dtype=a_.dtype, device=a_.device)
    lhs = a_.t() if transpose_a else a_
    for _ in range(5):
        torch.matmul(lhs, b_, out=out)
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(reps):
        torch.matmul(lhs, b_, out=out)
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3 / reps


def matmul_only(a):
    set_math(a)
    torch.cuda.set_device(0)
    dt = DTYPES[a.dtype]
    n = a.matmul_size
    x = torch.rand(n, n, device="cuda").to(dt)
    y = torch.rand(n, n, device="cuda").to(dt)
    t = time_matmul(x, y, 20)
    print("torch %s, %s: torch.matmul %s %d^3: %.1f us, %.1f TFLOP/s"
          % (torch.__version__, torch.cuda.get_device_name(0), a.dtype, n,
             t * 1e6, 2.0 * n ** 3 / t / 1e12))
    h = a.hidden
    xs = torch.rand(2 * h, h // 2, device="cuda").to(dt)
    dy = torch.rand(2 * h, h, device="cuda").to(dt)
    t = time_matmul(xs, dy, 20, transpose_a=True)
    print("torch.matmul %s x^T @ dy (%d x %d x %d, gemm_overlap's): %.1f us, "
          "%.1f TFLOP/s" % (a.dtype, h // 2, h, 2 * h, t * 1e6,
                            2.0 * h ** 3 / t / 1e12))


def worker(rank, world, a, port, results):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    if a.nccl_max_ctas > 0:
        os.environ["NCCL_MAX_CTAS"] = str(a.nccl_max_ctas)
    torch.cuda.set_device(rank)
    set_math(a)
    opts = dist.ProcessGroupNCCL.Options()
    opts.is_high_priority_stream = a.comm_priority == "high"
    # pg_options and device_id, where this PyTorch takes them.
    tries = [{"pg_options": opts, "device_id": torch.device("cuda", rank)},
             {"pg_options": opts}]
    if a.comm_priority != "high":
        tries.append({})
    for kw in tries:
        try:
            dist.init_process_group("nccl", rank=rank, world_size=world,
                                    **kw)
            break
        except TypeError:
            continue
    else:
        sys.exit("gemm_overlap_torch.py: this PyTorch takes no pg_options "
                 "(--comm-priority=high needs them)")
    host = dist.new_group(backend="gloo")
    dt = DTYPES[a.dtype]
    h = a.hidden
    gen = torch.Generator(device="cuda").manual_seed(1 + rank)
    if a.issue_step:
        x = torch.rand(h, h, device="cuda", generator=gen).to(dt)
        dy = torch.rand(h, h, device="cuda", generator=gen).to(dt)
        out = torch.empty(h, h, dtype=dt, device="cuda")
        elems = a.bucket_mb * (1 << 20) // torch.tensor([], dtype=dt).element_size()
        grads = [torch.rand(elems, device="cuda", generator=gen).to(dt)
                 for _ in range(a.layers)]

        def gemm(l):
            torch.matmul(x, dy, out=out)
    else:
        x = torch.rand(2 * h, h // 2, device="cuda", generator=gen).to(dt)
        dy = torch.rand(2 * h, h, device="cuda", generator=gen).to(dt)
        grads = [torch.empty(h // 2, h, dtype=dt, device="cuda")
                 for _ in range(a.layers)]

        def gemm(l):
            torch.matmul(x.t(), dy, out=grads[l])
    calc = torch.cuda.current_stream()
    comm = torch.cuda.Stream()

    def step(form):
        for l in range(a.layers):
            if form != "comm":
                gemm(l)
            if form == "comp":
                continue
            if form == "sync":
                dist.all_reduce(grads[l])
                continue
            comm.wait_stream(calc)  # c_wait_compute
            with torch.cuda.stream(comm):
                dist.all_reduce(grads[l])
        if form in ("async", "comm"):
            calc.wait_stream(comm)  # c_wait_comm

    forms = {"all": ["sync", "async", "comp", "comm"],
             "both": ["sync", "async"]}.get(a.mode, [a.mode])
    mine = {}
    for form in forms:
        times = []
        for it in range(a.iters):
            torch.cuda.synchronize()
            dist.barrier(group=host)
            t0 = time.perf_counter()
            step(form)
            torch.cuda.synchronize()
            t1 = time.perf_counter()
            if it >= a.warmup:
                times.append(t1 - t0)
        # An iteration's time is the slowest rank's.
        t = torch.tensor(times, dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=host)
        mine[form] = t.tolist()
    if rank == 0:
        results.update(mine)
        v = torch.cuda.nccl.version()
        results["nccl"] = (".".join(str(p) for p in v)
                           if isinstance(v, tuple) else str(v))
        results["device"] = torch.cuda.get_device_name(0)
    dist.barrier(group=host)
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv=None):
    a = parse_args(argv)
    if not torch.cuda.is_available():
        sys.exit("gemm_overlap_torch.py: no GPU visible")
    if a.matmul_only:
        matmul_only(a)
        return 0
    world = a.ranks or torch.cuda.device_count()
    if world > torch.cuda.device_count():
        sys.exit("gemm_overlap_torch.py: %d ranks asked, %d GPUs visible"
                 % (world, torch.cuda.device_count()))
    with mp.Manager() as manager:
        results = manager.dict()
        mp.spawn(worker, args=(world, a, free_port(), results), nprocs=world,
                 join=True)
        res = dict(results)
    h = a.hidden
    step = ("issue step: %d x { %s %d^3 matmul; %d MiB allreduce }"
            % (a.layers, a.dtype, h, a.bucket_mb) if a.issue_step else
            "gemm_overlap.sched's step: %d x { dw = x^T @ dy (%d x %d x %d, "
            "%s); allreduce(dw) (%.0f MiB) }"
            % (a.layers, h // 2, h, 2 * h, a.dtype,
               h * h / 2 * torch.tensor([], dtype=DTYPES[a.dtype])
               .element_size() / 2 ** 20))
    print("gemm_overlap_torch: torch %s, NCCL %s, %d x %s, %s, comm priority "
          "%s, NCCL_MAX_CTAS %s, %d iterations (%d warmup, %d timed)"
          % (torch.__version__, res["nccl"], world, res["device"], step,
             a.comm_priority, a.nccl_max_ctas or "default", a.iters,
             a.warmup, a.iters - a.warmup))
    print("%-6s %10s %12s %12s %12s" % ("mode", "total(s)", "median(ms)",
                                        "min(ms)", "max(ms)"))
    total = {}
    for form in ("sync", "async", "comp", "comm"):
        if form not in res:
            continue
        t = res[form]
        total[form] = sum(t)
        print("%-6s %10.4f %12.3f %12.3f %12.3f"
              % (form, sum(t), statistics.median(t) * 1e3, min(t) * 1e3,
                 max(t) * 1e3))
    if "sync" in total and "async" in total:
        print("async speedup: %.3fx (sync %.4f s / async %.4f s)"
              % (total["sync"] / total["async"], total["sync"],
                 total["async"]))
    if len(total) == 4:
        s, y, c, m = (total[k] for k in ("sync", "async", "comp", "comm"))
        print("ideal speedup: %.3fx (sync / max(comp %.4f s, comm %.4f s))"
              % (s / max(c, m), c, m))
        print("overlap efficiency: %.3f ((sync - async) / min(comp, comm); "
              "1 = the shorter part fully hidden)" % ((s - y) / min(c, m)))
        print("async / comp: %.4f" % (y / c))
    if "comp" in total:
        n_iter = a.iters - a.warmup
        flop = 2.0 * h ** 3 * a.layers * n_iter
        print("matmul (comp form, whole iterations): %.1f TFLOP/s per GPU"
              % (flop / total["comp"] / 1e12))
    return 0


if __name__ == "__main__":
    sys.exit(main())
