"""molpy's metric-reader registry (entry-point group ``molcrafts.metric_readers``) on our files.

The reader is found the way molpy's viewers find one — by format id in the entry-point group —
never imported from this package directly.  Its output is compared with molpy's own request
enforcement (``molpy.io.metric_reader.apply_request``) applied to the raw stream the test
builds from what it logged (documents §5.4–§5.6: dense part, WAL tail, host ``*.mlp.jsonl``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import molrec_raw as mr
from molrec_raw.errors import MolrecError

metric_reader = pytest.importorskip("molpy.io.metric_reader", reason="molpy (Python >= 3.12) is the registry's peer")

FORMAT = "molrec_raw"


def registered_reader(fmt: str) -> Any:
    """The reader a molcrafts viewer gets for ``fmt``: looked up in the entry-point group."""
    found = [ep for ep in entry_points(group="molcrafts.metric_readers") if ep.load().format == fmt]
    assert len(found) == 1, f"{len(found)} readers registered for format {fmt!r}"
    return found[0].load()()


@dataclass
class Progress:
    position: Optional[int] = None


@dataclass
class Request:
    since: int = 0
    stride: int = 1
    limit: Optional[int] = None
    metric_type: Optional[str] = None
    keys: Tuple[str, ...] = ()
    progress: Optional[Progress] = None


# what the run logs: key -> [(step or None, value)], in log order, after the duplicate-step rule
DENSE: Dict[str, List[Tuple[Optional[int], float]]] = {
    "train/loss": [(s, 1.0 / (s + 1)) for s in range(0, 50, 10)],
    "lr": [(s, 1e-3 * 0.5 ** (s // 20)) for s in range(0, 50, 10)],
    "note": [(None, 3.0)],
}
TAIL: Dict[str, List[Tuple[Optional[int], float]]] = {
    "train/loss": [(60, math.nan), (70, 0.01)],
    "eval/rmse": [(60, 0.5)],
}


def expected_series() -> Dict[str, List[Tuple[Optional[int], float]]]:
    merged = {k: list(v) for k, v in DENSE.items()}
    for k, v in TAIL.items():
        merged.setdefault(k, []).extend(v)
    return merged


def raw_stream(series: Dict[str, List[Tuple[Optional[int], float]]], source: str) -> List[Dict[str, Any]]:
    """documents §5.4: series-major, keys sorted; ``s`` the step, or the ordinal when step-less."""
    out = []
    for key in sorted(series):
        for i, (step, value) in enumerate(series[key]):
            out.append({"t": "scalar", "k": key, "s": float(i if step is None else step), "v": value,
                        "tags": {"source": source}})
    return out


def same(a: List[Dict[str, Any]], b: List[Dict[str, Any]]) -> bool:
    def norm(r: Dict[str, Any]) -> Any:
        return {**r, "v": "nan" if isinstance(r["v"], float) and math.isnan(r["v"]) else r["v"]}
    return [norm(r) for r in a] == [norm(r) for r in b]


def log(writer: mr.MetricsWriter, series: Dict[str, List[Tuple[Optional[int], float]]]) -> None:
    for key, points in series.items():
        for step, value in points:
            writer.log(key, value, step=step)


@pytest.fixture(scope="module")
def record_with_tail(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A record whose metrics are a dense part plus a WAL tail past the watermark."""
    path = tmp_path_factory.mktemp("molcrafts") / "run.mrec"
    frame = mr.Frame({}, {"atoms": mr.Block({"x": np.zeros(3)})})
    with mr.MrecWriter(path, mr.SequenceSchema.from_frame(frame)) as w:
        for i in range(3):
            w.append(frame, step=10 * i, time=0.5 * i)
    writer = mr.MetricsWriter(path)
    log(writer, DENSE)
    writer.flush()               # densified: the dense part
    log(writer, TAIL)
    writer._write_buffer()       # in the WAL past the watermark, never densified (a live run)
    writer.abort()
    return path


def test_documents_5_5_registry_yields_dense_part_and_wal_tail(record_with_tail: Path) -> None:
    reader = registered_reader(FORMAT)
    assert reader.sniff(record_with_tail)
    got = list(reader.read(record_with_tail, source="run"))
    assert same(got, raw_stream(expected_series(), "run"))
    assert {r["k"] for r in got} == {"train/loss", "lr", "note", "eval/rmse"}  # not only step/time


def test_documents_5_5_molpys_own_mrec_reader_sees_only_step_and_time(record_with_tail: Path) -> None:
    """Why our reader is registered: molpy's ``mrec`` format yields no metric series."""
    keys = {r["k"] for r in registered_reader("mrec").read(record_with_tail, source="run")}
    assert keys == {"mrec/step", "mrec/time"}


def test_documents_5_5_packed_record_reads_the_same(record_with_tail: Path, tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / "run.mrec"
    shutil.copytree(record_with_tail, copy)
    zipped = mr.pack_mrec_zip(copy)
    reader = registered_reader(FORMAT)
    assert reader.sniff(Path(zipped))
    assert same(list(reader.read(Path(zipped), source="z")), raw_stream(expected_series(), "z"))


requests = st.builds(
    Request,
    since=st.integers(0, 16),
    stride=st.integers(0, 4),
    limit=st.one_of(st.none(), st.integers(-1, 12)),
    metric_type=st.sampled_from([None, "scalar", "histogram"]),
    keys=st.lists(st.sampled_from(["train/loss", "lr", "note", "eval/rmse", "absent"]), max_size=3,
                  unique=True).map(tuple),
)


@settings(max_examples=60, deadline=None)
@given(request=requests, with_progress=st.booleans())
def test_documents_5_5_request_honoured_as_molpy_enforces_it(record_with_tail: Path, request: Request,
                                                             with_progress: bool) -> None:
    """since / stride / limit / metric_type / keys / progress mean what molpy's own
    ``apply_request`` makes them mean, over the same raw stream."""
    ours_req = Request(**{**request.__dict__, "progress": Progress() if with_progress else None})
    peer_req = Request(**{**request.__dict__, "progress": Progress() if with_progress else None})
    got = list(registered_reader(FORMAT).read(record_with_tail, source="run", request=ours_req))
    want = list(metric_reader.apply_request(peer_req, raw_stream(expected_series(), "run")))
    assert same(got, want)
    if with_progress:
        assert ours_req.progress.position == peer_req.progress.position


def test_documents_5_6_host_wal_read_with_torn_tail(tmp_path: Path) -> None:
    wal = tmp_path / "artifacts" / "metrics.mlp.jsonl"
    wal.parent.mkdir()
    with mr.MetricsWriter(wal) as writer:
        log(writer, DENSE)
    with open(wal, "ab") as fh:
        fh.write(b'{"k": "train/lo')  # a live writer caught mid-line: not a record yet
    reader = registered_reader(FORMAT)
    assert reader.sniff(wal)
    assert same(list(reader.read(wal, source="host")), raw_stream(DENSE, "host"))
    # the viewer finds it by the reader's patterns
    assert wal in {p for pattern in reader.patterns for p in tmp_path.glob(pattern)}


def test_decision_9_bad_complete_line_is_refused_not_skipped(tmp_path: Path) -> None:
    wal = tmp_path / "metrics.mlp.jsonl"
    with mr.MetricsWriter(wal) as writer:
        log(writer, DENSE)
    with open(wal, "ab") as fh:
        fh.write(b"not json\n")
    with pytest.raises(MolrecError, match="metrics.mlp.jsonl"):
        list(registered_reader(FORMAT).read(wal, source="host"))


def test_sniff_refuses_what_is_not_ours(tmp_path: Path) -> None:
    reader = registered_reader(FORMAT)
    (tmp_path / "x.mrec").mkdir()                      # a directory that is not a record
    (tmp_path / "log.lammps").write_text("Step Temp\n")
    assert not reader.sniff(tmp_path / "x.mrec")
    assert not reader.sniff(tmp_path / "log.lammps")
    assert not reader.sniff(tmp_path / "missing.mrec")
