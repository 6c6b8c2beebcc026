#!/usr/bin/env python
"""The workload of bench/appends.py for a count of instructions (issue 37): run under
``valgrind --tool=callgrind`` at two frame counts and subtract, a measure the machine's load
does not move.

    PYTHONPATH=<tree> valgrind --tool=callgrind --callgrind-out-file=/dev/null \\
        python bench/append_instructions.py N PREC MODE

``PREC`` 1: x y z declared at precision 1e-3; ``MODE`` 0: the appends alone (``flush_every``
above N, not durable, then ``abort()``), 1: durable appends and ``close()``, 2: only building
the frames (what 0 and 1 include and is not the writer's).  Instructions per append: the
"Collected" figure at N=1200 minus that at N=300, over 900, minus the same for MODE 2.
"""
import sys
import tempfile
import shutil

import numpy as np

from molrec_raw.record.model import Block, Frame
from molrec_raw.record.trajectory import MrecWriter, SequenceSchema

N = int(sys.argv[1])
prec = sys.argv[2] == "1"
mode = sys.argv[3]
xyz = np.random.default_rng(0).uniform(0, 20, size=(max(N, 1), 3, 64)).round(3)
frames = [Frame({"pe": -0.5 * i}, {"atoms": Block({"x": xyz[i, 0], "y": xyz[i, 1], "z": xyz[i, 2]})}) for i in range(N)]
schema = SequenceSchema().declare_block("atoms")
for c in "xyz":
    schema.declare_column("atoms", c, "f64")
    if prec:
        schema.declare_precision("atoms", c, 1e-3)
schema.declare_meta("pe", "f64")
d = tempfile.mkdtemp()
w = MrecWriter(d + "/a.mrec", schema, **({} if mode == "1" else {"flush_every": 100000, "durable": False}))
for i, f in enumerate(frames if mode != "2" else []):
    w.append(f, step=i)
if mode == "1":
    w.close()
else:
    w.abort()
shutil.rmtree(d)
