"""Start-up cost: ``import molrec_raw`` and ``molrec-raw --help`` (issue 24).

Every figure comes from a fresh interpreter (bytecode cached: each command runs once
before timing) and is the best of ``--repeats`` runs, wall time and CPU time side by side.
Inside one child process the four dependencies are imported first, then ``molrec_raw``,
then the names a program uses first (``read_mrec``, ``MrecWriter``, ...), so each stage's
cost is measured beyond the one before it.  ``--baseline DIR`` runs the same measurements
with another source tree first on the path (e.g. main: ``git archive main | tar -x -C
/tmp/main-src``), so before and after come from the same run on the same machine::

    python bench/startup.py
    python bench/startup.py --baseline /tmp/main-src --repeats 15 --json startup.json
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional

CHILD = r"""
import json, time
w0, c0 = time.perf_counter(), time.process_time()
import numpy, zstandard, crc32c, orjson
w1, c1 = time.perf_counter(), time.process_time()
import molrec_raw
w2, c2 = time.perf_counter(), time.process_time()
for name in ("read_mrec", "write_mrec", "read_mrec_frame", "MrecWriter", "MrecReader", "MetricsWriter"):
    getattr(molrec_raw, name)
w3, c3 = time.perf_counter(), time.process_time()
ms = lambda a, b: round(1000 * (b - a), 3)
print(json.dumps({"deps": [ms(w0, w1), ms(c0, c1)], "import molrec_raw": [ms(w1, w2), ms(c1, c2)],
                  "first use (core names)": [ms(w2, w3), ms(c2, c3)],
                  "import + first use": [ms(w1, w3), ms(c1, c3)]}))
"""


def _env(baseline: Optional[str]) -> Dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if baseline:
        env["PYTHONPATH"] = baseline + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _run(args: List[str], env: Dict[str, str], cwd: str) -> "tuple[float, float, str]":
    """Wall and CPU milliseconds of one child process, and its stdout."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return 1000 * wall, 1000 * cpu, done.stdout


def measure(trees: Dict[str, Optional[str]], repeats: int) -> Dict[str, Dict[str, List[float]]]:
    """``{tree: {stage: [best wall ms, best cpu ms]}}``; ``trees`` maps a label to the source
    tree put first on the path (None: the installed package).  The trees take turns within
    each repeat, so a change of the machine's load touches both alike."""
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "python -m molrec_raw --help": [sys.executable, "-m", "molrec_raw", "--help"],
    }
    best: Dict[str, Dict[str, List[float]]] = {label: {} for label in trees}
    with tempfile.TemporaryDirectory() as cwd:  # not the checkout: only the path decides
        envs = {label: _env(tree) for label, tree in trees.items()}
        for label, env in envs.items():
            where = _run([sys.executable, "-c", "import molrec_raw; print(molrec_raw.__file__)"], env, cwd)[2]
            print(f"# {label}: {where.strip()}")
            for args in [*commands.values(), [sys.executable, "-c", CHILD]]:
                _run(args, env, cwd)  # bytecode written once before anything is timed
        for _ in range(repeats):
            for label, env in envs.items():
                stages = {name: list(values) for name, values in json.loads(_run([sys.executable, "-c", CHILD], env,
                                                                                  cwd)[2]).items()}
                for name, args in commands.items():
                    wall, cpu, _out = _run(args, env, cwd)
                    stages[name] = [wall, cpu]
                for name, (wall, cpu) in stages.items():
                    kept = best[label].setdefault(name, [wall, cpu])
                    kept[0], kept[1] = min(kept[0], wall), min(kept[1], cpu)
    return best


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=9, help="runs per figure; the best is kept (default 9)")
    parser.add_argument("--baseline", default=None, metavar="DIR",
                        help="another source tree (containing molrec_raw/) measured first, for before/after")
    parser.add_argument("--json", default=None, metavar="FILE", help="also write every figure as JSON")
    args = parser.parse_args(argv)
    trees: Dict[str, Optional[str]] = {"baseline": args.baseline} if args.baseline else {}
    trees["this tree"] = None
    runs = measure(trees, args.repeats)
    stages = list(runs["this tree"])
    print(f"best of {args.repeats}, milliseconds (wall / cpu)")
    print("| stage | " + " | ".join(runs) + (" | after / before (wall, cpu) |" if args.baseline else " |"))
    print("|---|" + "---|" * (len(runs) + bool(args.baseline)))
    for stage in stages:
        cells = [f"{runs[r][stage][0]:.1f} / {runs[r][stage][1]:.1f}" for r in runs]
        if args.baseline:
            (bw, bc), (aw, ac) = runs["baseline"][stage], runs["this tree"][stage]
            cells.append(f"{aw / bw:.2f}, {ac / bc:.2f}" if bw >= 0.5 and bc >= 0.5 else "- (nothing before)")
        print(f"| {stage} | " + " | ".join(cells) + " |")
    mine = runs["this tree"]
    print(f"import molrec_raw beyond its dependencies: {mine['import molrec_raw'][0]:.1f} ms wall "
          f"({mine['import molrec_raw'][0] / mine['deps'][0]:.3f} x the dependencies' own import; limit 60 ms)")
    print(f"--help: {mine['python -m molrec_raw --help'][0]:.1f} ms wall, interpreter start "
          f"{mine['python -c pass'][0]:.1f} ms (limit 250 ms)")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump({"repeats": args.repeats, "runs": runs}, out, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
