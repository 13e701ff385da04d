#!/usr/bin/env python3
"""Checks of overlap_sim's JSON outputs, for tests/cli*.sh (which run this
only where python3 exists).

    check_json.py trace FILE RANKS MODES   # --trace: a Chrome trace file
                                           # (MODES: the runs' modes, or
                                           # labels: "async race 1")
    check_json.py results FILE MODES       # --json=FILE of a run

MODES is a comma-separated list (sync,async). Exits 0 when every check
holds, else prints what failed and exits 1.
"""
import json
import sys

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
    return cond


def check_trace(path, nranks, modes):
    # A run is named by its mode, or by a label that starts with it (a
    # replay: "async race 1").
    labels = modes
    modes = [m.split(" ")[0] for m in modes]
    with open(path) as f:
        doc = json.load(f)
    check(isinstance(doc, dict), "the file is a JSON object")
    for key in ("traceEvents", "displayTimeUnit", "otherData"):
        check(key in doc, "key %s" % key)
    ev = doc["traceEvents"]
    procs = {}    # pid -> name
    threads = {}  # (pid, tid) -> name
    slices = {}   # (pid, tid) -> [(ts, end, event)]
    flows = {}    # id -> {"s": event, "f": event}
    for e in ev:
        ph = e.get("ph")
        if ph == "M" and e["name"] == "process_name":
            procs[e["pid"]] = e["args"]["name"]
        elif ph == "M" and e["name"] == "thread_name":
            threads[(e["pid"], e["tid"])] = e["args"]["name"]
        elif ph == "X":
            for key in ("ts", "dur", "name", "pid", "tid", "args"):
                check(key in e, "slice has %s: %r" % (key, e))
            check(e["dur"] >= 0, "slice duration >= 0: %r" % e)
            slices.setdefault((e["pid"], e["tid"]), []).append(
                (e["ts"], e["ts"] + e["dur"], e))
        elif ph in ("s", "f"):
            flows.setdefault(e["id"], {})[ph] = e
    # A process per (mode, rank), named after the rank and its device.
    for mode in labels:
        for r in range(nranks):
            want = "rank %d (" % r
            if len(labels) > 1 or mode not in modes:
                want = "%s: %s" % (mode, want)
            check(any(n.startswith(want) for n in procs.values()),
                  "a process named %r..." % want)
    names = set(threads.values())
    for t in ("calc", "comm[0]", "host"):
        check(t in names, "a track named %s" % t)
    # Slices on calc and on comm tracks; none overlap on one track.
    for tname in ("calc", "comm[0]"):
        check(any(threads.get(k) == tname and v for k, v in slices.items()),
              "slices on a %s track" % tname)
    # On one track slices follow each other, or one lies inside another
    # (a collective's wait for its peers inside the collective).
    for key, lst in slices.items():
        lst.sort(key=lambda x: (x[0], -x[1]))
        open_ = []
        for a in lst:
            while open_ and open_[-1][1] <= a[0] + 1e-9:
                open_.pop()
            if open_:
                check(a[1] <= open_[-1][1] + 1e-9,
                      "slices on %r do not overlap: %r then %r" %
                      (key, open_[-1][2]["name"], a[2]["name"]))
                check(a[2].get("cat") == "peer_wait",
                      "only a wait for peers lies inside a slice: %r in %r" %
                      (a[2]["name"], open_[-1][2]["name"]))
            open_.append(a)
    # Waits by kind; raced ops named and coloured.
    for lst in slices.values():
        for _, _, e in lst:
            a = e["args"]
            if e.get("cat") == "event_wait":
                check(a.get("wait") == "event", "an event wait: %r" % e)
            if e.get("cat") == "host_sync":
                check(a.get("wait") == "host_sync", "a host sync: %r" % e)
            if e.get("cat") == "peer_wait":
                check(a.get("wait") == "peers", "a wait for peers: %r" % e)
            if "race" in a:
                check(all(("race %d" % k) in e["name"] for k in a["race"]) and
                      e.get("cname") == "terrible",
                      "a raced op is named and red: %r" % e)
    # Every slice: source file:line, bytes, mode.
    for lst in slices.values():
        for _, _, e in lst:
            a = e["args"]
            check(":" in a.get("source", ""), "source file:line: %r" % e)
            check(isinstance(a.get("bytes"), int), "bytes: %r" % e)
            check(a.get("mode") in modes, "mode: %r" % e)
    # Collectives carry ring and seq, also in their name.
    colls = [e for lst in slices.values() for _, _, e in lst
             if e.get("cat") == "collective"]
    check(colls, "collective slices")
    for e in colls:
        check("seq" in e["args"] and "ring" in e["args"],
              "collective args seq, ring: %r" % e)
        check("#%d" % e["args"].get("seq", -1) in e["name"],
              "collective name has #seq: %r" % e["name"])
    # Flow arrows: pairs, each end inside a slice of its track.
    if "async" in modes:
        check(flows, "flow arrows")

    def enclosing(e):
        for ts, end, sl in slices.get((e["pid"], e["tid"]), []):
            if ts <= e["ts"] <= end:
                return sl
        return None
    for fid, pair in flows.items():
        if not check("s" in pair and "f" in pair, "flow %r has s and f" % fid):
            continue
        s, f = pair["s"], pair["f"]
        check(f.get("bp") == "e", "flow %r: f has bp e" % fid)
        src, dst = enclosing(s), enclosing(f)
        check(src is not None, "flow %r starts inside a slice" % fid)
        check(dst is not None, "flow %r ends inside a slice" % fid)
        check(s["tid"] != f["tid"], "flow %r goes to another stream" % fid)
        # The arrow ends where the wait ends (1 ns inside it; at its end
        # where it lasts under 2 ns, as a predicted wait may), and never
        # before it starts (a stalled wait ends after the record; a
        # predicted one may end the very nanosecond the record does, the
        # arrow's ends 1 ns inside each: 2 ns apart).
        if dst is not None:
            inset = 0.001 if dst["dur"] >= 0.002 else 0
            check(abs(dst["ts"] + dst["dur"] - inset - f["ts"]) < 0.0005,
                  "flow %r ends at the end of its wait" % fid)
        check(f["ts"] >= s["ts"] - 0.0025, "flow %r points forward: %r -> %r" %
              (fid, s["ts"], f["ts"]))


RESULT_KEYS = ("tool", "version", "schedule", "machine", "options", "modes",
               "findings", "speedup", "ideal_speedup", "overlap_efficiency", "trials",
               "result", "exit_status")
SCHEDULE_KEYS = ("path", "params", "ops", "fetched", "bytes_per_rank")
MACHINE_KEYS = ("backend", "ranks", "devices", "device_summary", "hostname",
                "cpu_model", "driver_version", "cuda_runtime_version",
                "nccl_version")
OPTION_KEYS = ("mode", "iters", "warmup", "timed", "rtol", "atol",
               "timeout_s", "races", "op_times", "graph", "chaos_seed",
               "comm_priority", "nccl_min_ctas", "nccl_max_ctas", "tf32",
               "machine", "profile", "check_rows", "trials", "trial_budget_s", "trace",
               "svg", "trace_iter", "defines")
MODE_KEYS = ("total_s", "median_s", "min_s", "max_s", "iter_s", "predicted",
             "explain", "check", "races")
EXPLAIN_KEYS = ("rank", "total_s", "compute_s", "exposed_comm_s",
                "contention_s", "host_s", "waits_s")
CHECK_KEYS = ("status", "checked", "unchecked", "mismatched", "nonfinite",
              "vars")
VAR_KEYS = ("rank", "var", "dtype", "rtol", "atol", "checked", "mismatched",
            "nonfinite", "fetched", "first_nonfinite", "first_index",
            "first_at", "got", "expected")
TRIALS_KEYS = ("count", "total_s", "speedup", "speedup_spread",
               "ideal_speedup", "overlap_efficiency", "each")


def has_keys(obj, keys, where):
    for k in keys:
        check(k in obj, "%s has key %s" % (where, k))


def check_results(path, modes):
    with open(path) as f:
        doc = json.load(f)
    has_keys(doc, RESULT_KEYS, "results")
    has_keys(doc["schedule"], SCHEDULE_KEYS, "schedule")
    has_keys(doc["machine"], MACHINE_KEYS, "machine")
    has_keys(doc["options"], OPTION_KEYS, "options")
    check(len(doc["machine"]["devices"]) == doc["machine"]["ranks"],
          "one device per rank")
    check(list(doc["modes"]) == modes, "modes %r" % list(doc["modes"]))
    for name, m in doc["modes"].items():
        has_keys(m, MODE_KEYS, "modes.%s" % name)
        check(len(m["iter_s"]) == doc["options"]["timed"],
              "one time per timed iteration")
        check(m["min_s"] <= m["median_s"] <= m["max_s"], "min <= median <= max")
        check(abs(sum(m["iter_s"]) - m["total_s"]) < 1e-6, "total is the sum")
        if m["explain"] is not None:
            x = m["explain"]
            has_keys(x, EXPLAIN_KEYS, "modes.%s.explain" % name)
            parts = sum(x[k] for k in EXPLAIN_KEYS[2:] if x[k] is not None)
            check(abs(parts - x["total_s"]) <= 1e-6 * max(1, x["total_s"]),
                  "modes.%s.explain: its parts add up to the total" % name)
        has_keys(m["check"], CHECK_KEYS, "modes.%s.check" % name)
        for v in m["check"]["vars"]:
            has_keys(v, VAR_KEYS, "modes.%s.check.vars[]" % name)
    if "sync" in modes and "async" in modes:
        check(isinstance(doc["speedup"], float), "speedup is a number")
    # Trials: each figure's min <= median <= max; one entry per trial, each
    # with every mode; the top-level figures are the medians.
    tr = doc["trials"]
    has_keys(tr, TRIALS_KEYS, "trials")
    check(tr["count"] >= 1 and len(tr["each"]) == tr["count"],
          "one entry per trial")
    for name in modes:
        st = tr["total_s"][name]
        check(st["min"] <= st["median"] <= st["max"],
              "trials.total_s.%s: min <= median <= max" % name)
        check(all(name in e for e in tr["each"]), "every trial ran %s" % name)
        check(abs(tr["each"][-1][name]["total_s"] -
                  doc["modes"][name]["total_s"]) < 1e-6,
              "modes.%s is the last trial" % name)
    for fig in ("speedup", "ideal_speedup", "overlap_efficiency"):
        if tr[fig] is None:
            check(doc[fig] is None, "%s null as its trials" % fig)
            continue
        check(tr[fig]["min"] <= tr[fig]["median"] <= tr[fig]["max"],
              "trials.%s: min <= median <= max" % fig)
        check(abs(tr[fig]["median"] - doc[fig]) <= 1e-6 * abs(doc[fig]),
              "%s is the median over the trials" % fig)
    check(doc["result"].startswith(("PASS", "FAIL")), "result")
    # "findings": each bug once, whatever the forms it is in (a report made
    # with the checks); the groups of forms whose findings read the same.
    fd = doc.get("findings")
    if doc["options"]["races"]:
        check(isinstance(fd, dict), "findings")
        if isinstance(fd, dict):
            has_keys(fd, ("races", "mismatches", "deadlocks", "same"),
                     "findings")
            check(sorted(f for g in fd["same"] for f in g) == sorted(modes),
                  "findings.same groups every mode once: %r" % fd["same"])
            for name, m in doc["modes"].items():
                for r in (m["races"] or {}).get("races", []):
                    check(name in (r.get("forms") or []),
                          "a race of %s lists its form: %r" % (name, r))
            listed = set()
            for m in doc["modes"].values():
                for r in (m["races"] or {}).get("races", []):
                    listed.add((r["var"], r["first"]["line"],
                                r["first"]["col"], r["second"]["line"],
                                r["second"]["col"]))
            check(fd["races"] >= len(listed),
                  "findings.races counts each race once: %r" % fd)
    else:
        check(fd is None, "findings null without the checks")


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    what, path = sys.argv[1], sys.argv[2]
    if what == "trace":
        check_trace(path, int(sys.argv[3]), sys.argv[4].split(","))
    elif what == "results":
        check_results(path, sys.argv[3].split(","))
    else:
        print(__doc__)
        return 2
    for f in failures[:20]:
        print("check_json: %s: %s" % (path, f))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
