"""Which call of the app's file reading holds the GIL long (issue 24 §5).

    python benchmarks/probe_open_gil.py [ROWS]      # default 200,000 (bench_app_workflow's file)

A watcher thread sleeps 1 ms in a loop and records its wake-up latency; on a late wake it
records where every other thread is (the holder has just dropped the GIL: its frame is at or
just after the call that held it).  Probed: ``compute.load_table`` as a thread of the window's
process runs it, unpickling what the child sends back, starting the spare child.  On 27 Nov
2026 (200,000 rows, 9 MB): pandas' ``to_numeric`` on the object texts of a float column
(engine/io/convert.py ``_to_float``) 77-243 ms, the same converter in the app's
``column_stats`` (the distinct ids) 60 ms, the ``repr`` list of ``_written_text`` 20-60 ms
(two typing threads and the GUI thread taking turns); unpickling the table 10 ms (longest wait
8 ms); starting the spare 3-21 ms with no wait over 5 ms.
"""

import pickle
import sys
import threading
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _household import household  # noqa: E402


class Watch:
    def __init__(self, bound=0.015):
        self.bound = bound
        self.late = []
        self.stop = threading.Event()
        self.me = None
        self.t = threading.Thread(target=self.run, daemon=True)

    def run(self):
        self.me = threading.get_ident()
        while not self.stop.is_set():
            t0 = time.perf_counter()
            time.sleep(0.001)
            lat = time.perf_counter() - t0 - 0.001
            if lat > self.bound:
                where = []
                for tid, fr in sys._current_frames().items():
                    if tid == self.me:
                        continue
                    st = traceback.extract_stack(fr)
                    where.append(
                        " <- ".join(f"{Path(f.filename).name}:{f.lineno} {f.name}" for f in reversed(st[-4:]))
                    )
                self.late.append((lat, where))

    def __enter__(self):
        self.t.start()
        return self

    def __exit__(self, *a):
        self.stop.set()
        self.t.join()

    def report(self, title, n=8):
        print(f"== {title}: late wakes > {self.bound * 1000:.0f} ms: {len(self.late)}; worst:")
        for lat, where in sorted(self.late, key=lambda x: -x[0])[:n]:
            print(f"  {lat * 1000:6.1f} ms")
            for w in where:
                print(f"      {w}")


def main():
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    import tempfile

    path = Path(tempfile.gettempdir()) / f"dps_probe_household_{rows}.csv"
    if not path.exists():
        household(rows).to_csv(path, index=False)
    from dpstudio.app import compute
    from dpstudio.engine import io as eio  # noqa

    # warm imports
    compute.load_table(str(path), {}, check_cancel=lambda: None, progress=lambda f: None)
    for rep in range(2):
        with Watch() as w:
            t0, c0 = time.perf_counter(), time.process_time()
            out = compute.load_table(str(path), {}, check_cancel=lambda: None, progress=lambda f: None)
            print(f"load_table: {time.perf_counter() - t0:.3f} s wall, {time.process_time() - c0:.3f} s CPU")
        w.report(f"load_table rep {rep}")
    data = pickle.dumps(out, protocol=pickle.HIGHEST_PROTOCOL)
    print(f"pickle: {len(data) / 1e6:.1f} MB")
    for rep in range(2):
        with Watch(0.005) as w:
            t0 = time.perf_counter()
            pickle.loads(data)
            print(f"unpickle: {(time.perf_counter() - t0) * 1000:.1f} ms")
        w.report(f"unpickle rep {rep}")
    from dpstudio.app import subproc

    for rep in range(2):
        with Watch(0.005) as w:
            t0 = time.perf_counter()
            subproc.prestart()
            print(f"prestart: {(time.perf_counter() - t0) * 1000:.1f} ms")
        w.report(f"prestart rep {rep}")
        subproc.discard_spare()
    df, meta, stats = out
    print(df.dtypes.to_dict())
    print({k: (type(v), getattr(v, "dtype", None)) for k, v in (meta.texts or {}).items()})


if __name__ == "__main__":
    main()
