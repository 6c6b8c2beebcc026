"""The core never imports an optional extra's tool: reading over HTTP is the standard
library alone; fsspec is imported only when a non-HTTP URL is opened."""
from __future__ import annotations

import subprocess
import sys

CHECK = """
import sys, numpy as np
import molrec_raw as mr, molrec_raw.cli
from molrec_raw.zarr.rangeserver import serve_directory
frames = [mr.Frame({}, {"atoms": mr.Block({"x": np.arange(3.0) + i})}) for i in range(3)]
mr.write_mrec_trajectory("t.mrec", frames)
mr.pack_mrec_zip("t.mrec")
with serve_directory(".") as server:
    assert len(mr.read_mrec(server.url_of("t.mrec.zip")).trajectory) == 3
print(sorted(m for m in ("fsspec", "xarray", "dask", "distributed", "aiohttp", "requests") if m in sys.modules))
"""


def test_reading_over_http_imports_no_optional_tool(tmp_path):
    done = subprocess.run([sys.executable, "-c", CHECK], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
