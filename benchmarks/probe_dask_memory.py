"""Where a Dask worker's memory goes (issue 25, d-dask2): ir-dp (protect_dask + write_release)
on bench_dask.py's synthetic data, every worker sampled every 20 ms by a worker plugin: RSS,
stored results (managed), PyArrow's live bytes, glibc's heap (in use / free) and its large
blocks in use (mmapped), the other anonymous memory (PyArrow's mimalloc pool, the interpreter),
LazyFree and huge pages (every 100 ms), the p2p buffers in use, minor page faults and the
executing task.  Samples go to OUT-VARIANT-ROWS.PID.json (one file per worker); summarise with

    python benchmarks/probe_dask_memory.py --rows 10000000 --cols 5 --memory-limit 1GB
    python benchmarks/probe_dask_memory.py --summary /tmp/dd2/probe-base-10000000

``--variant`` (tried in d-dask2, none adopted): ``trim`` = PyArrow's release_unused() and
glibc's malloc_trim(0) after every task, ``gc`` = gc.collect() after every task, ``system`` /
``jemalloc`` = PyArrow on another allocator, ``mmap32`` / ``arena2`` = glibc mallopt; ``noprof`` = Dask's statistical profiler stopped;
``tmalloc`` = tracemalloc in the workers, a snapshot
of the live allocations of 64 KiB or more every ~10 s (grouped by where they were made).
Data in /tmp/dd2 (generated when missing); figures: results/bench_dask_issue25.md."""
import argparse, glob, json, logging, os, statistics, sys, threading, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_dask as BD
from distributed.diagnostics.plugin import WorkerPlugin




class Probe(WorkerPlugin):
    name = "probe"

    def __init__(self, variant=""):
        self.variant = variant

    def setup(self, worker):
        import pyarrow as pa
        self.w = worker
        self.samples = []
        self.stop = threading.Event()
        import ctypes

        class _MI2(ctypes.Structure):
            _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd",
                        "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]
        libc = ctypes.CDLL("libc.so.6")
        libc.mallinfo2.restype = _MI2
        self.libc = libc
        if "system" in self.variant:
            pa.set_memory_pool(pa.system_memory_pool())
        if "jemalloc" in self.variant:
            pa.set_memory_pool(pa.jemalloc_memory_pool()); pa.jemalloc_set_decay_ms(0)
        if "mmap32" in self.variant:
            libc.mallopt(-3, 32 * 2**20)
        if "arena2" in self.variant:
            libc.mallopt(-8, 2)
        self.snaps = []
        self.blocks = []
        if "noprof" in self.variant:  # Dask's statistical profiler off (its 1,000 s of history)
            for name in ("profile", "profile-cycle"):
                pc = worker.periodic_callbacks.pop(name, None)
                if pc is not None:
                    pc.stop()
            worker.profile_history.clear()
            worker.profile_keys_history.clear()
        if "tmalloc" in self.variant:
            import tracemalloc

            tracemalloc.start(16)
        self.t = threading.Thread(target=self.loop, daemon=True)
        self.t.start()

    def snapshot(self, rss):
        """tmalloc: the live traced allocations grouped by where they were made (the five
        innermost frames; numpy's buffers and Python's objects are traced, PyArrow's pool
        is not): the 40 largest places, and the bytes in blocks of 64 KiB or more."""
        import tracemalloc

        groups: dict = {}
        big = 0
        for _dom, size, tb, _n in tracemalloc._get_traces():
            g = groups.setdefault(tb[:5], [0, 0])
            g[0] += size
            g[1] += 1
            if size >= 65536:
                big += size
        top = sorted(groups.items(), key=lambda kv: -kv[1][0])[:40]
        ex = ";".join(str(ts.key)[:40] for ts in list(self.w.state.executing))
        self.snaps.append((time.time(), rss, tracemalloc.get_traced_memory()[0], big, ex,
                           [(g[0], g[1], [f"{os.path.basename(f)}:{ln}" for f, ln in tb]) for tb, g in top],
                           len(self.w.state.tasks)))

    def transition(self, key, start, finish, **kw):
        if "gc" in self.variant and start == "executing":
            import gc
            t0 = time.perf_counter()
            gc.collect()
            self.hook = getattr(self, "hook", 0.0) + time.perf_counter() - t0
        if "trim" in self.variant and start == "executing":
            self.libc.malloc_trim(0)
            import pyarrow as pa
            pa.default_memory_pool().release_unused()

    def loop(self):
        import pyarrow as pa
        page = os.sysconf("SC_PAGE_SIZE")
        i = 0
        lazy = huge = 0
        while not self.stop.is_set():
            i += 1
            if i % 5 == 0:
                try:
                    with open("/proc/self/smaps_rollup") as f:
                        for ln in f:
                            if ln.startswith("LazyFree:"):
                                lazy = int(ln.split()[1]) * 1024
                            elif ln.startswith("AnonHugePages:"):
                                huge = int(ln.split()[1]) * 1024
                except Exception:
                    pass
            try:
                with open("/proc/self/statm") as f:
                    st = f.read().split()
                    rss = int(st[1]) * page
                    anon = rss - int(st[2]) * page
                with open("/proc/self/stat") as f:
                    minflt = int(f.read().rsplit(")", 1)[1].split()[7])
                fast = getattr(self.w.data, "fast", None)
                managed = int(getattr(fast, "total_weight", 0) or 0)
                mi = self.libc.mallinfo2()
                ex = [str(ts.key)[:40] for ts in list(self.w.state.executing)]
                ext = self.w.extensions.get("shuffle")
                comm = getattr(getattr(ext, "memory_limiter_comms", None), "_acquired", 0)
                disk = getattr(getattr(ext, "memory_limiter_disk", None), "_acquired", 0)
                # d-sort: what else is live -- p2p buffers of every open run (comm: to send,
                # disk: received, not yet written), data arriving from other workers, the
                # stored results (count), tasks known to the worker, ready tasks, threads
                runs = getattr(getattr(ext, "shuffle_runs", None), "_runs", ()) or ()
                pcomm = pdisk = 0
                for r in list(runs):
                    pcomm += int(getattr(getattr(r, "_comm_buffer", None), "bytes_memory", 0) or 0)
                    pdisk += int(getattr(getattr(r, "_disk_buffer", None), "bytes_memory", 0) or 0)
                st = self.w.state
                self.samples.append((time.time(), rss, managed, pa.total_allocated_bytes(), mi.arena, mi.hblkhd,
                                     mi.uordblks, mi.fordblks, comm, disk, minflt, ";".join(ex), lazy, huge, anon,
                                     len(runs), pcomm, pdisk, int(st.transfer_incoming_bytes), len(fast or ()),
                                     len(st.tasks), len(st.ready), threading.active_count(),
                                     int(getattr(getattr(self.w.data, "spilled_total", None), "disk", 0) or 0)))
            except Exception as e:
                self.samples.append((time.time(), -1, str(e)))
            if i % 50 == 0:  # the interpreter's live small blocks (pymalloc), about every second
                self.blocks.append((time.time(), sys.getallocatedblocks(), self.samples[-1][1]))
            if "tmalloc" in self.variant and i % 750 == 0:
                try:
                    self.snapshot(self.samples[-1][1])
                except Exception as e:
                    self.snaps.append((time.time(), -1, str(e)))
            self.stop.wait(0.02)


def dump(path, dask_worker=None):
    p = dask_worker.plugins["probe"]
    with open(path + f".{os.getpid()}.json", "w") as f:
        json.dump(p.samples, f)
    if p.snaps:
        with open(path + f".{os.getpid()}.snaps", "w") as f:
            json.dump(p.snaps, f)
    # pymalloc's arenas (256 KiB each) against the blocks in use: fragmentation of the heap
    r, w = os.pipe()
    saved = os.dup(2)
    os.dup2(w, 2)
    try:
        sys._debugmallocstats()
    finally:
        os.dup2(saved, 2)
        os.close(w)
        os.close(saved)
    with os.fdopen(r) as f:
        stats = [ln.rstrip() for ln in f.read().splitlines() if ln.startswith(("# arenas", "Total", "# bytes in allocated blocks", "# bytes in available blocks", "# bytes lost"))]
    import collections
    import gc

    def kind(o) -> str:
        t = type(o)
        m = getattr(t, "__module__", "?")
        return f"{m if isinstance(m, str) else '?'}.{t.__qualname__}"

    objs = gc.get_objects()
    kinds = collections.Counter(kind(o) for o in objs).most_common(25)
    # where the tracked containers hang from: the types of the objects referring to a sample of
    # the most common kind (a cheap look at what keeps them)
    top = kinds[0][0] if kinds else ""
    sample = [o for o in objs if kind(o) == top][::997][:40]
    refs = collections.Counter(kind(r) for o in sample for r in gc.get_referrers(o) if r is not sample and r is not objs).most_common(10)
    # the largest containers (a list of a million ints is one tracked object), and who holds them
    import collections as _c

    big = sorted(
        (o for o in objs if isinstance(o, (list, dict, set, _c.deque)) and len(o) >= 10_000),
        key=len,
        reverse=True,
    )[:8]
    largest = []
    for o in big:
        holders = []
        for r in gc.get_referrers(o):
            if r is objs or r is big:
                continue
            if isinstance(r, dict):
                names = [k for k, v in r.items() if v is o][:2]
                owners = [kind(x) for x in gc.get_referrers(r) if x is not objs and x is not big and not isinstance(x, list)][:3]
                holders.append(f"dict[{names}] of {owners}")
            else:
                holders.append(kind(r))
        first = next(iter(o), None)
        largest.append((kind(o), len(o), kind(first) if first is not None else "", holders[:3]))
    del objs, sample, big
    with open(path + f".{os.getpid()}.blocks", "w") as f:
        json.dump({"blocks": p.blocks, "mallocstats": stats, "kinds": kinds, "refs": refs, "largest": largest}, f)
    print("hook seconds", os.getpid(), getattr(p, "hook", None), flush=True)
    return len(p.samples)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--cols", type=int, default=5)
    ap.add_argument("--parts", type=int, default=None)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--memory-limit", default="1GB")
    ap.add_argument("--variant", default="")
    ap.add_argument("--out", default="/tmp/dd2/probe")
    ap.add_argument("--dir", default="/tmp/dd2", help="where the data and the release go")
    ap.add_argument("--partition-rows", type=int, default=None, help="force the rows of every partition and range")
    ap.add_argument("--summary", default=None, help="summarise the sample files PREFIX*.json and stop")
    a = ap.parse_args()
    if a.summary:
        summary(a.summary)
        return
    from dask.utils import parse_bytes
    from distributed import Client
    from dpstudio.engine.backends import dask_backend as DB
    parts = a.parts or max(1, -(-a.rows // 1_000_000))
    src = f"{a.dir}/synthetic-{a.rows}x{a.cols}-{parts}"
    if not os.path.exists(src):
        BD.generate(src, a.rows, parts, a.cols)
    domains = {c: BD.ALL_DOMAINS[c] for c in "abcde"[: a.cols]}
    out = f"{a.dir}/out-{a.variant or 'base'}"
    import shutil; shutil.rmtree(out, ignore_errors=True)
    if os.path.exists(out + ".private.json"):
        os.remove(out + ".private.json")
    restarts = BD._Restarts(); logging.getLogger("distributed.nanny.memory").addHandler(restarts)
    t0 = time.perf_counter(); c0 = os.times()
    with DB.local_cluster(n_workers=a.workers, threads_per_worker=1, memory_limit=parse_bytes(a.memory_limit),
                          processes=True, dashboard_address=None) as cl, Client(cl) as client:
        client.register_plugin(Probe(a.variant), name="probe")
        rel = DB.protect_dask(src, "ir-dp", {c: "eps-quasi" for c in domains}, domains, seed=1, client=client,
                              k=5, epsilon=1.0, partition_rows=a.partition_rows)
        DB.write_release(rel, out)
        wall = time.perf_counter() - t0
        tag = f"{a.out}-{a.variant or 'base'}-{a.rows}"
        client.run(dump, tag)
        spilled = client.run(BD._spilled)
        cpu = client.run(lambda: tuple(os.times())[:2])
    print(f"variant={a.variant or 'base'} rows={a.rows} wall={wall:.1f}s restarts={restarts.count} "
          f"spilled={sum(spilled.values())/2**20:.0f}MB ranges={rel.info.get('ranges')} workers_cpu={cpu}", flush=True)
    shutil.rmtree(out, ignore_errors=True)


def summary(prefix: str) -> None:
    M = 2**20
    for path in sorted(glob.glob(prefix + "*.json")):
        s = [x for x in json.load(open(path)) if x[1] != -1 and len(x) >= 15]
        if not s:
            continue
        un = sorted((x[1] - x[2]) / M for x in s)
        other = [(x[14] - x[4] - x[5]) / M for x in s]
        pk = max(s, key=lambda x: x[1])
        print(f"{os.path.basename(path)}: peak RSS {pk[1] / M:.0f} MB (stored {pk[2] / M:.0f}, glibc large blocks "
              f"in use {pk[5] / M:.0f}, glibc heap {pk[4] / M:.0f} of which free {pk[7] / M:.0f}, other anonymous "
              f"{(pk[14] - pk[4] - pk[5]) / M:.0f}, Arrow live {pk[3] / M:.0f}, LazyFree {pk[12] / M:.0f}; task {pk[11][:50]}); "
              f"unmanaged median {statistics.median(un):.0f} p99 {un[int(0.99 * len(un))]:.0f} max {un[-1]:.0f} MB; "
              f"other anonymous median {statistics.median(other):.0f} max {max(other):.0f} MB; "
              f"minor faults {s[-1][10] - s[0][10]:,}")
        if len(pk) > 15:
            _detail(s)
        blocks_path = path[: -len(".json")] + ".blocks"
        if os.path.exists(blocks_path):
            b = json.load(open(blocks_path))
            bl = b["blocks"]
            if bl:
                n = len(bl)
                print("   pymalloc blocks in use by twentieths (thousands; RSS MB): " + " ".join(
                    f"{bl[min(n - 1, i * n // 20)][1] / 1e3:.0f}:{bl[min(n - 1, i * n // 20)][2] / M:.0f}" for i in range(20)))
            print("   at the end: " + "; ".join(" ".join(x.split()) for x in b["mallocstats"]))
            if b.get("kinds"):
                print("   at the end, objects the collector tracks, most common: " + ", ".join(f"{k} {n:,}" for k, n in b["kinds"][:15]))
                print("   what refers to a sample of the first kind: " + ", ".join(f"{k} {n}" for k, n in b["refs"]))
            for k, n, first, holders in b.get("largest", []):
                print(f"   at the end, a large container: {k} of {n:,} ({first} ...), held by {holders}")
        snaps_path = path[: -len(".json")] + ".snaps"
        if os.path.exists(snaps_path):
            _snaps([x for x in json.load(open(snaps_path)) if x[1] != -1])


def _snaps(sn) -> None:
    """tmalloc: the traced allocations of 64 KiB or more at the snapshot of highest RSS, and
    each place's median and most over the run's second half (MB)."""
    M = 2**20
    if not sn:
        return
    pk = max(sn, key=lambda x: x[1])
    print(f"   tracemalloc: {len(sn)} snapshots; at the highest RSS ({pk[1] / M:.0f} MB, task {pk[4][:40]}): traced "
          f"{pk[2] / M:.0f} MB, of which in blocks >= 64 KiB {pk[3] / M:.0f} MB; the largest places:")
    for size, cnt, tb in pk[5][:10]:
        print(f"     {size / M:7.1f} MB {cnt:5}x  " + " < ".join(tb[:6]))
    third = max(1, len(sn) // 3)
    first, last = sn[:third], sn[-third:]

    def med(part, where):
        return statistics.median([next((z[0] for z in x[5] if " < ".join(z[2][:6]) == where), 0) for x in part])

    places = {" < ".join(z[2][:6]) for x in sn for z in x[5]}
    growth = sorted(((med(last, w) - med(first, w), w) for w in places), reverse=True)
    print(f"   growth, first third -> last third of the snapshots (traced median "
          f"{statistics.median(x[2] for x in first) / M:.0f} -> {statistics.median(x[2] for x in last) / M:.0f} MB, "
          f"RSS median {statistics.median(x[1] for x in first) / M:.0f} -> {statistics.median(x[1] for x in last) / M:.0f} MB, "
          f"tasks known {statistics.median(x[6] for x in first):.0f} -> {statistics.median(x[6] for x in last):.0f}):")
    for g, where in growth[:10]:
        print(f"     {g / M:+7.1f} MB  {where}")
    late = sn[len(sn) // 2 :]
    per: dict = {}
    for x in late:
        for size, _cnt, tb in x[5]:
            per.setdefault(" < ".join(tb[:6]), []).append(size)
    print(f"   second half ({len(late)} snapshots): traced median {statistics.median(x[2] for x in late) / M:.0f} MB, "
          f"blocks >= 64 KiB median {statistics.median(x[3] for x in late) / M:.0f} MB; places by median (MB, med / max, seen):")
    rows = sorted(per.items(), key=lambda kv: -statistics.median(kv[1] + [0] * (len(late) - len(kv[1]))))
    for where, v in rows[:12]:
        med = statistics.median(v + [0] * (len(late) - len(v)))
        print(f"     {med / M:7.1f} / {max(v) / M:7.1f}  ({len(v)})  {where}")


def _prefix(key: str) -> str:
    """The task's name without its token ('shuffle-transfer', '_release_piece', ...)."""
    import re

    k = key.split(";")[0].lstrip("('\"")
    m = re.match(r"([A-Za-z_][A-Za-z0-9_\-]*?)-[0-9a-f]{6,}", k)
    return m.group(1) if m else (k[:24] or "(idle)")


def _detail(s) -> None:
    """d-sort: the peak per kind of task running, what is live in the 1 % highest samples, and
    the run in twentieths (peak, and the task at that peak)."""
    M = 2**20
    by: dict = {}
    for x in s:
        by.setdefault(_prefix(x[11]), []).append(x[1])
    print("   peak RSS by the task running (MB: max / p90, samples):")
    for name, v in sorted(by.items(), key=lambda kv: -max(kv[1]))[:12]:
        v = sorted(v)
        print(f"     {name:32} {v[-1] / M:6.0f} / {v[int(0.9 * (len(v) - 1))] / M:6.0f}  ({len(v)})")
    # each task's own growth (its highest RSS minus the RSS when it started) against what the
    # worker held when it started
    grow: dict = {}
    i = 0
    while i < len(s):
        j = i
        while j + 1 < len(s) and s[j + 1][11] == s[i][11]:
            j += 1
        if s[i][11]:
            start, most = s[i][1], max(x[1] for x in s[i : j + 1])
            g = grow.setdefault(_prefix(s[i][11]), [0, 0, 0])
            g[0], g[1], g[2] = max(g[0], most - start), max(g[1], start), g[2] + 1
        i = j + 1
    print("   per task: most growth while running / most held at its start (MB), tasks:")
    for name, (g0, g1, cnt) in sorted(grow.items(), key=lambda kv: -kv[1][0])[:12]:
        print(f"     {name:32} {g0 / M:6.0f} / {g1 / M:6.0f}  ({cnt})")
    top = sorted(s, key=lambda x: -x[1])[: max(1, len(s) // 100)]
    def mean(i, scale=M):
        return statistics.mean(x[i] for x in top) / scale
    print(f"   1 % highest samples (mean): RSS {mean(1):.0f}, stored {mean(2):.0f} ({mean(19, 1):.1f} results), "
          f"Arrow live {mean(3):.0f}, glibc large blocks {mean(5):.0f}, other anon "
          f"{statistics.mean(x[14] - x[4] - x[5] for x in top) / M:.0f}, p2p runs {mean(15, 1):.1f} "
          f"(to send {mean(16):.0f}, received unwritten {mean(17):.0f}), incoming {mean(18):.0f}, "
          f"tasks known {mean(20, 1):.0f}, ready {mean(21, 1):.0f}, threads {mean(22, 1):.0f}, on disk {mean(23):.0f} MB")
    t0, t1 = s[0][0], s[-1][0]
    step = (t1 - t0) / 20 or 1
    line = []
    for i in range(20):
        win = [x for x in s if t0 + i * step <= x[0] < t0 + (i + 1) * step] or [s[-1]]
        w = max(win, key=lambda x: x[1])
        line.append(f"{w[1] / M:.0f}:{_prefix(w[11])[:14]}")
    print("   twentieths (peak:task): " + " ".join(line))


if __name__ == "__main__":
    main()
