"""What a trajectory read over HTTP costs, counted on the server (trajectory §9 over a
packed record, trajectory#15): each shard index is read at most once per reader, a random frame
after warm-up costs at most one request per column it touches, the columns of a frame are
fetched concurrently, and sequential iteration reads ahead instead of once per frame."""
from __future__ import annotations

import numpy as np
import pytest

import molrec_raw as mr
from molrec_raw import MrecReader
from remote_helpers import faulty_server

FRAMES, ROWS = 300, 2048  # 2048 f64 rows = one 16 KiB inner chunk per column and frame; 2 shards


@pytest.fixture(scope="module")
def served(tmp_path_factory, write_coordinates):
    root = tmp_path_factory.mktemp("served")
    mr.pack_mrec_zip(write_coordinates(root / "c.mrec", FRAMES, ROWS))
    with faulty_server(root) as server:
        yield server, root


def cost(server, read):
    before = server.requests
    read()
    return server.requests - before


def test_trajectory_9_random_frames_cost_one_request_per_column_after_warm_up(served):
    server, root = served
    xyz = [("atoms", c) for c in "xyz"]
    with MrecReader(server.url_of("c.mrec.zip")) as reader, MrecReader(root / "c.mrec") as local:
        for warm in (0, FRAMES - 1):  # one frame in each shard: shard indexes and local headers
            reader[warm]
        rng = np.random.default_rng(15)
        picked = rng.choice(np.arange(2, FRAMES - 2), size=29, replace=False).tolist()
        costs = [cost(server, lambda: reader.read_columns(i, xyz)) for i in picked[:25]]
        assert max(costs) <= 3 and sum(costs) >= 3 * 25 - 6  # a few bytes lie in the tail read at open
        for i in picked[25:]:  # a whole frame touches the same three columns
            frame = []
            assert 1 <= cost(server, lambda: frame.append(reader[i])) <= 3
            for c in "xyz":
                np.testing.assert_array_equal(frame[0].blocks["atoms"].columns[c], local[i].blocks["atoms"].columns[c])
        assert cost(server, lambda: reader.read_columns(picked[0], [("atoms", "x")])) == 0  # cached


def test_trajectory_9_each_shard_index_is_read_once_per_reader(served):
    """Each shard's index page is read at most once per reader: opening reads the pages of
    the shards the last commit can have changed (the tail shards, recovery.py), the first
    read of another shard reads its page (checked then) and the engine keeps it — every
    later read of a column costs one request, the chunk, and no range is fetched twice."""
    server, _ = served
    x = [("atoms", "x")]
    opened, spent = [], []
    for _ in range(2):  # a new reader reads them again, at the same cost
        readers = []
        first = len(server.log)
        opened.append(cost(server, lambda: readers.append(MrecReader(server.url_of("c.mrec.zip")))))
        with readers[0] as reader:
            # frames 5..254 lie in x's first shard (its index page read by the first of
            # them), 260 and 280 in its tail shard (its page read at open)
            spent.append([cost(server, lambda: reader.read_columns(i, x)) for i in (5, 50, 100, 200, 254, 280, 260)])
        ranges = [entry[2] for entry in server.log[first:] if entry[0] == "GET"]
        assert len(ranges) == len(set(ranges)), ranges
    assert spent == [[2, 1, 1, 1, 1, 1, 1]] * 2
    assert opened[0] == opened[1]


def test_trajectory_9_the_columns_of_a_frame_are_fetched_concurrently(served):
    server, _ = served
    with MrecReader(server.url_of("c.mrec.zip")) as reader:
        reader[0]
        reader[FRAMES - 1]
        server.latency, server.state.max_in_flight = 0.05, 0
        try:
            reader[150]
        finally:
            server.latency = 0.0
        assert server.state.max_in_flight >= 2


def test_trajectory_9_sequential_iteration_reads_ahead(served):
    server, root = served
    with MrecReader(server.url_of("c.mrec.zip")) as reader, MrecReader(root / "c.mrec") as local:
        before = server.requests
        for remote_frame, local_frame in zip(reader, local):
            np.testing.assert_array_equal(remote_frame.blocks["atoms"].columns["z"],
                                          local_frame.blocks["atoms"].columns["z"])
        spent = server.requests - before
    assert spent <= 3 * 14  # per column: doubling runs over 2 shards + 2 indexes, not 300 reads


BATCH = [10, 11, 12, 100, 10, 270, 271, 150, 12]  # any order, duplicates; runs 10-12, 100, 150, 270-271


@pytest.mark.parametrize("how", ["read_frames", "block_array", "xarray"])
def test_trajectory_9_a_batch_fetches_each_needed_range_once(served, how):
    """A batch over HTTP is planned as one read: every byte range it needs is requested once
    (none twice, duplicates and reordering included), neighbouring chunks in one request —
    per column one request per run of neighbouring frames (4 runs here) and the index page of
    the first shard (the tail shard's was read at open); the same through ``read_frames``,
    ``block_array(..., frames=indices)`` and the xarray backend's lazy indexing."""
    server, root = served
    url = server.url_of("c.mrec.zip")
    with MrecReader(root / "c.mrec") as local:
        want = np.stack([local.block_array("atoms", [c], BATCH)[:, :, 0] for c in "xyz"], axis=-1)
    columns = "xyz"
    with MrecReader(url) as reader:
        first = len(server.log)
        if how == "read_frames":
            frames = reader.read_frames(BATCH)
            got = np.stack([[f.blocks["atoms"].columns[c] for c in "xyz"] for f in frames]).transpose(0, 2, 1)
        elif how == "block_array":
            got = reader.block_array("atoms", ["x", "y", "z"], np.asarray(BATCH))
        else:
            xr = pytest.importorskip("xarray", reason="xarray is not installed (pip install 'molrec-raw[xarray]')")
            with xr.open_dataset(url, engine="mrec", group="trajectory/atoms") as ds:
                first = len(server.log)
                got = ds["x"][BATCH].values[:, :, None]
            columns, want = "x", want[:, :, :1]
        ranges = [entry[2] for entry in server.log[first:] if entry[0] == "GET"]
    np.testing.assert_array_equal(got, want)
    assert len(ranges) == len(set(ranges)), ranges
    assert len(ranges) == len(columns) * (4 + 1), ranges
