"""``molrec_raw.integrations.dask.block_array``: a lazy Dask array over a block with a fixed
row count (trajectory §9), chunked on inner-chunk boundaries, whose graph carries only the
record's location and names — and a LocalCluster run over 16 records (directories, zips,
records served over loopback HTTP) that equals the serial result."""
from __future__ import annotations

import pickle

import numpy as np
import pytest

dask = pytest.importorskip("dask", reason="the Dask arrays need the [dask] extra")

import molrec_raw as mr  # noqa: E402
from molrec_raw import MrecReader  # noqa: E402
from molrec_raw.errors import InvalidValueError  # noqa: E402
from molrec_raw.integrations.dask import block_array, read_frames  # noqa: E402
from molrec_raw.zarr.rangeserver import serve_directory  # noqa: E402


@pytest.fixture(scope="module")
def coords(tmp_path_factory, write_coordinates):
    root = tmp_path_factory.mktemp("dask")
    mr.pack_mrec_zip(write_coordinates(root / "c.mrec", 20, 1000))  # 3 frames per inner chunk
    with serve_directory(root) as server:
        yield root, server


def test_trajectory_9_block_array_is_lazy_chunked_on_inner_chunks_and_exact(coords):
    root, server = coords
    with MrecReader(root / "c.mrec") as reader:
        expected = reader.block_array("atoms", ["x", "y", "z"])
    for location in (root / "c.mrec", root / "c.mrec.zip", server.url_of("c.mrec.zip")):
        array = block_array(location, chunk_bytes=1)  # as small as allowed: one inner chunk a task
        assert array.shape == (20, 1000, 3) and array.chunks[0] == (3, 3, 3, 3, 3, 3, 2)
        np.testing.assert_array_equal(array.compute(scheduler="threads"), expected)
        np.testing.assert_array_equal(array[7:11].compute(scheduler="sync"), expected[7:11])
    assert block_array(root / "c.mrec").chunks[0] == (20,)  # the default aims at 32 MiB tasks


def test_the_graph_pickles_only_paths_and_names(coords):
    root, server = coords
    array = block_array(server.url_of("c.mrec.zip"), columns=["z", "x"], chunk_bytes=1)
    graph = dict(array.__dask_graph__())
    assert len(graph) == 7
    for task in graph.values():
        function, *arguments = task
        assert function is read_frames
        location, block, columns, start, stop = arguments
        assert (location, block, columns) == (server.url_of("c.mrec.zip"), "atoms", ("z", "x"))
        assert isinstance(start, int) and isinstance(stop, int)
    assert len(pickle.dumps(graph)) < 2000


def test_block_array_refusals(tmp_path):
    frames = [mr.Frame({}, {"atoms": mr.Block({"x": np.zeros(k)})}) for k in (2, 3)]
    mr.write_mrec_trajectory(tmp_path / "r.mrec", frames)
    with pytest.raises(InvalidValueError, match="ragged"):
        block_array(tmp_path / "r.mrec", columns=["x"])
    with pytest.raises(InvalidValueError, match="local path or a URL"):
        block_array(mr.zarr.MemoryStore())
    late = [mr.Frame({}, {})] + [mr.Frame({}, {"atoms": mr.Block({"x": np.zeros(2)})})] * 2
    mr.write_mrec_trajectory(tmp_path / "l.mrec", late)
    with pytest.raises(InvalidValueError, match="absent at frame 0"):
        block_array(tmp_path / "l.mrec", columns=["x"])


# -- a cluster run -------------------------------------------------------------------------------
def _msd(positions):
    """Mean-square displacement from frame 0, per frame (works on numpy and Dask arrays)."""
    return ((positions - positions[0:1]) ** 2).sum(axis=2).mean(axis=1)


def test_a_local_cluster_over_16_records_equals_the_serial_result(tmp_path, write_coordinates):
    distributed = pytest.importorskip("distributed", reason="the cluster run needs distributed ([dask] extra)")
    locations = []
    with serve_directory(tmp_path) as server:
        for k in range(16):
            path = write_coordinates(tmp_path / f"r{k}.mrec", 9 + k, 700 + 10 * k)
            if k % 3 == 0:
                locations.append(str(path))  # a directory
            else:
                zipped = mr.pack_mrec_zip(path)
                locations.append(str(zipped) if k % 3 == 1 else server.url_of(zipped.name))  # a zip, or over HTTP
        serial = []
        for location in locations:
            with MrecReader(location) as reader:
                serial.append(_msd(reader.block_array("atoms", ["x", "y", "z"])))
        with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                      dashboard_address=None) as cluster, distributed.Client(cluster) as client:
            lazy = [_msd(block_array(location, chunk_bytes=256 * 1024)) for location in locations]
            results = client.gather(client.compute(lazy))
            assert len(client.scheduler_info()["workers"]) == 2
    for got, expected in zip(results, serial):
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=0)
