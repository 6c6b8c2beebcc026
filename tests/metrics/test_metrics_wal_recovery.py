"""Torn tails, corrupt lines, the watermark against the file, one writer per WAL
(documents#9.14, #9.15; decisions 9 and 16)."""
from __future__ import annotations


import pytest

from molrec_raw.errors import CorruptDataError, InvalidValueError, StoreError
from molrec_raw.record.metrics import MetricsWriter, check_metrics_group, read_metrics
from molrec_raw.zarr import open_group

from metrics_helpers import catalog_of, wal_of

LINE = '{"t":"scalar","k":"a","s":%d,"w":"2026-08-04T00:00:00Z","v":%d}\n'


def _host_wal(run_dir, text: str):
    (run_dir / "artifacts").mkdir(exist_ok=True)
    path = run_dir / "artifacts" / "metrics.mlp.jsonl"
    path.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    return path


def test_documents_9_15_torn_tail_is_ignored_by_readers(record, run_dir) -> None:
    torn = '{"t":"scalar","k":"a","s":3,"w":"2026-08'
    path = _host_wal(run_dir, LINE % (1, 1) + LINE % (2, 2) + torn)
    assert read_metrics(path)["a"].steps.tolist() == [1, 2]
    with MetricsWriter(record) as writer:
        writer.log("a", 1.0, step=1)
        writer.flush()
        writer.log("a", 2.0, step=2)
        writer._write_buffer()
        with open(wal_of(record), "ab") as fh:
            fh.write(torn.encode())
        assert read_metrics(record)["a"].steps.tolist() == [1, 2]
        writer._wal.close()  # crash: nothing more is written
        writer.closed = True


def test_documents_9_14_a_reopening_writer_truncates_the_torn_tail(record, run_dir) -> None:
    path = _host_wal(run_dir, LINE % (1, 1) + '{"t":"scalar","k":"a","s":2,"w":"20')
    with MetricsWriter.for_host(run_dir) as writer:
        writer.log("a", 3.0, step=3, wall_time="2026-08-04T00:00:00Z")
    text = LINE % (1, 1) + (LINE % (3, 3)).replace('"v":3', '"v":3.0')
    assert path.read_text() == text + "\n" * (4096 - len(text))  # blank lines end the durable close at 4 KiB
    with MetricsWriter(record) as writer:
        writer.log("a", 1.0, step=1)
    with open(wal_of(record), "ab") as fh:
        fh.write(b'{"t":"scal')
    with MetricsWriter(record) as writer:
        writer.log("a", 2.0, step=2)
    raw = wal_of(record).read_bytes()
    events = [line for line in raw.split(b"\n") if line]
    assert len(events) == 2 and b"scal\n" not in raw and raw.endswith(b"\n")
    assert read_metrics(record)["a"].steps.tolist() == [1, 2]


def test_documents_9_15_blank_lines_are_skipped_and_counted_by_the_watermark(record) -> None:
    (record / "metrics").mkdir()
    open_group(record, "r+").create_group("metrics")
    text = "\n" + LINE % (1, 1) + "\n   \n" + LINE % (2, 2) + "\n"
    wal_of(record).write_text(text)
    assert read_metrics(record)["a"].values.tolist() == [1.0, 2.0]
    with MetricsWriter(record) as writer:
        writer.log("a", 3.0, step=3)
    catalog = catalog_of(record)
    raw = wal_of(record).read_bytes()
    assert catalog["wal"] == {"lines": raw.count(b"\n"), "bytes": len(raw)}  # README decision 16: blank lines count
    assert len(raw) == 4096 and raw.count(b"\n") > 7  # the padding of the durable close counts too
    assert read_metrics(record)["a"].values.tolist() == [1.0, 2.0, 3.0]


BAD_LINES = [
    ("not json", "JSON"),
    ("[1, 2]", "JSON array|object"),
    ('{"t":"scalar","k":"a","w":"x","v":1}{"t":"scalar","k":"a","w":"x","v":2}', "JSON"),
    ('{"t":"scalar","k":"a","w":"x","v":1},', "JSON"),
    ('"just a string"', "object"),
    ('{"t":"scalar","w":"x","v":1}', "'k'"),
    ('{"t":"scalar","k":"","w":"x","v":1}', "'k'"),
    ('{"t":"scalar","k":"a","v":1}', "'w'"),
    ('{"t":"scalar","k":"a","w":"x"}', "'v'"),
    ('{"t":"scalar","k":"a","w":"x","v":true}', "'v'"),
    ('{"t":"scalar","k":"a","w":"x","v":"1.5"}', "'v'"),
    ('{"t":"scalar","k":"a","w":"x","v":1,"s":1.0}', "'s'"),
    ('{"t":"scalar","k":"a","w":"x","v":1,"s":9223372036854775808}', "'s'"),
    ('{"t":"scalar","k":"a","w":"x","v":1,"tags":[1]}', "'tags'"),
    ('{"t":"scalar","k":["a"],"w":"x","v":1}', "'k'"),
    ('{"k":"a","w":"x","v":1}', "'t'"),
    (b'{"t":"scalar","k":"\xff","w":"x","v":1}', "UTF-8|JSON"),
]


@pytest.mark.parametrize("bad,why", BAD_LINES)
def test_decision_9_a_complete_bad_line_is_refused_with_file_line_and_offset(run_dir, bad, why) -> None:
    first = (LINE % (1, 1)).encode()
    bad_bytes = bad if isinstance(bad, bytes) else bad.encode()
    path = _host_wal(run_dir, first + b"\n" + bad_bytes + b"\n" + (LINE % (2, 2)).encode())
    with pytest.raises(CorruptDataError) as info:
        read_metrics(path)
    message = str(info.value)
    assert str(path) in message and "line 3" in message and f"byte offset {len(first) + 1}" in message
    import re
    assert re.search(why, message), message


def test_decision_9_lenient_host_reader_skips_bad_lines_with_a_warning(run_dir) -> None:
    path = _host_wal(run_dir, LINE % (1, 1) + "garbage\n" + LINE % (2, 2) + '{"t":"scalar"}\n')
    with pytest.warns(UserWarning, match="skipped 2 bad line.*line 2"):
        got = read_metrics(path, lenient=True)
    assert got["a"].steps.tolist() == [1, 2]


def test_decision_9_lenient_mode_is_for_host_files_only(record) -> None:
    with pytest.raises(InvalidValueError, match="host"):
        read_metrics(record, lenient=True)


def test_decision_9_a_bad_line_in_a_record_tail_is_refused_by_reader_and_writer(record) -> None:
    with MetricsWriter(record) as writer:
        writer.log("a", 1.0, step=1)
    good = wal_of(record).read_bytes()
    with open(wal_of(record), "ab") as fh:
        fh.write(b"{oops}\n")
    line = good.count(b"\n") + 1  # the blank lines that end the durable close count as lines
    with pytest.raises(CorruptDataError, match=f"line {line} \\(byte offset {len(good)}\\)"):
        read_metrics(record)
    with pytest.raises(CorruptDataError, match=f"line {line}"):
        MetricsWriter(record)
    problems = check_metrics_group(open_group(record, "r")["metrics"])
    assert [p.rule for p in problems] == ["documents#9.15"] and f"line {line}" in problems[0].message


def test_decision_16_a_wal_shorter_than_the_watermark(record) -> None:
    with MetricsWriter(record) as writer:
        writer.log("a", 1.0, step=1)
        writer.log("a", 2.0, step=2)
    raw = wal_of(record).read_bytes()
    wal_of(record).write_bytes(raw[: raw.index(b"\n") + 1])  # truncated outside the writer
    got = read_metrics(record)
    assert got["a"].values.tolist() == [1.0, 2.0]  # the dense series, no tail
    problems = check_metrics_group(open_group(record, "r")["metrics"])
    assert [p.rule for p in problems] == ["README#decision-16"] and "truncated" in problems[0].message
    with pytest.raises(CorruptDataError, match="truncated"):
        MetricsWriter(record)
    wal_of(record).unlink()  # a WAL that is gone entirely: the same
    assert read_metrics(record)["a"].values.tolist() == [1.0, 2.0]
    with pytest.raises(CorruptDataError, match="truncated"):
        MetricsWriter(record)


def test_decision_16_a_watermark_inside_a_line_is_refused(record) -> None:
    with MetricsWriter(record) as writer:
        writer.log("a", 1.0, step=1)
    raw = wal_of(record).read_bytes()
    wal_of(record).write_bytes(raw[:-1] + b"x")  # changed outside the writer: no line ends at the watermark
    with pytest.raises(CorruptDataError, match="does not end a line"):
        read_metrics(record)
    with pytest.raises(CorruptDataError, match="does not end a line"):
        MetricsWriter(record)


def test_decision_16_a_watermark_line_count_that_disagrees_with_the_file(record) -> None:
    with MetricsWriter(record) as writer:
        writer.log("a", 1.0, step=1)
        writer.log("a", 2.0, step=2)
    group = open_group(record, "r+")["metrics"]
    attrs = group.attrs.asdict()
    attrs["wal"]["lines"] = 5
    group.attrs.put(attrs)
    assert read_metrics(record)["a"].values.tolist() == [1.0, 2.0]  # readers resume after bytes
    problems = check_metrics_group(open_group(record, "r")["metrics"])
    assert [p.rule for p in problems] == ["README#decision-16"] and "5 lines" in problems[0].message
    with pytest.raises(CorruptDataError, match="5 lines"):
        MetricsWriter(record)


def test_documents_9_14_one_writer_per_wal(record, run_dir) -> None:
    first = MetricsWriter(record)
    first.log("a", 1.0)
    with pytest.raises(StoreError, match="another writer"):
        MetricsWriter(record)
    first.close()
    with MetricsWriter(record) as second:
        second.log("a", 2.0)
    assert len(read_metrics(record)["a"]) == 2
    host = MetricsWriter.for_host(run_dir)
    with pytest.raises(StoreError, match="lock"):
        MetricsWriter.for_host(run_dir)
    MetricsWriter.for_host(run_dir, stem="other").close()  # another WAL: its own lock
    host.close()


def test_documents_9_14_a_refused_second_writer_touches_nothing(record) -> None:
    first = MetricsWriter(record)
    first.log("a", 1.0)
    first._write_buffer()
    with open(wal_of(record), "ab") as fh:
        fh.write(b'{"t":"sca')  # as if the first writer were mid-line
    before = wal_of(record).read_bytes()
    with pytest.raises(StoreError):
        MetricsWriter(record)
    assert wal_of(record).read_bytes() == before
    first._wal.close()
    first.closed = True


def test_documents_9_14_writer_lifecycle_close_flushes_and_releases(record) -> None:
    writer = MetricsWriter(record)
    writer.log("a", 1.0)
    writer.close()
    writer.close()  # idempotent
    assert writer.closed
    with pytest.raises(StoreError, match="closed"):
        writer.log("a", 2.0)
    with pytest.raises(StoreError, match="closed"):
        writer.log("new", 2.0)
    with pytest.raises(StoreError, match="closed"):
        writer.flush()
    with pytest.raises(ValueError):
        with MetricsWriter(record) as w2:
            w2.log("a", 3.0)
            raise ValueError("the training loop failed")
    assert read_metrics(record)["a"].values.tolist() == [1.0, 3.0]  # flushed on the way out
