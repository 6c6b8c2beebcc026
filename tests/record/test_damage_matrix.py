"""Damage is reported where it lies (issue 28): a damage matrix — truncate, zero, flip, delete x
each kind of node (group zarr.json, array zarr.json, chunk, shard index) — on a small demo
record, and for every cell what ``validate``, ``repair --dry-run``, ``inspect`` and ``cat`` of
an intact block do (spec-notes/safety.md "Damage costs only the reads that need it").

Every cell: ``validate`` names the damaged node (exit 1); ``repair --dry-run`` gives its
report naming it (exit 1, never a raw error with exit 2); ``inspect`` lists the record and
marks the damage it meets without decoding chunks (every cell but bytes changed inside a
stored chunk, which only decoding finds: ``validate``), exiting 1 when it marks any (exit 0
otherwise); ``cat`` of an intact block
prints it (exit 0) while ``cat`` of the damaged one refuses (exit 2), never fill values."""
from __future__ import annotations

import shutil
import struct
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

from molrec_raw.cli import main
from molrec_raw.demo import write_demo
from molrec_raw.record.molrec import validate
from molrec_raw.record.trajectory import MrecReader

from shard_bytes import end_of_chunks

INDEX_PAGE = 4096  # a start-indexed shard's index page (the demo's trajectory arrays)
MUTATIONS = ("truncate", "zero", "flip", "delete")
# kind -> (file damaged, node named, the block it damages, an intact block)
NODES: Dict[str, Tuple[str, str, str, str]] = {
    "group": ("trajectory/bonds/zarr.json", "trajectory/bonds", "bonds", "atoms"),
    "array-metadata": ("trajectory/atoms/x/zarr.json", "trajectory/atoms/x", "atoms", "bonds"),
    "chunk": ("trajectory/atoms/x/c/0", "trajectory/atoms/x", "atoms", "bonds"),
    "shard-index": ("trajectory/atoms/x/c/0", "trajectory/atoms/x", "atoms", "bonds"),
}
# bytes changed inside a stored chunk: found by decoding it (validate, repair), not by inspect
FOUND_BY_DECODING = {("chunk", "zero"), ("chunk", "flip")}


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_demo(tmp_path_factory.mktemp("damage") / "demo.mrec", frames=12, molecules=4)


def _region(kind: str, data: bytes) -> Tuple[int, int]:
    """The bytes a mutation of ``kind`` changes: a whole zarr.json, the shard's index entries,
    or its last inner chunk."""
    if kind in ("group", "array-metadata"):
        return 0, len(data)
    if kind == "shard-index":
        return 0, 64
    end = end_of_chunks(data)
    start = max(offset for offset, size in (struct.unpack_from("<QQ", data, at) for at in range(0, 64, 16))
                if offset + size == end)
    return start, end


def damage(record: Path, kind: str, mutation: str) -> None:
    target = record / NODES[kind][0]
    data = bytearray(target.read_bytes())
    lo, hi = _region(kind, bytes(data))
    if mutation == "delete":
        if kind == "shard-index":
            target.write_bytes(bytes(data[INDEX_PAGE:]))  # the page gone, the chunks left
        else:
            target.unlink()
    elif mutation == "truncate":
        target.write_bytes(bytes(data[:(lo + hi) // 2]))
    elif mutation == "zero":
        data[lo:hi] = bytes(hi - lo)
        target.write_bytes(bytes(data))
    else:
        data[(lo + hi) // 2] ^= 0x10
        target.write_bytes(bytes(data))


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> Tuple[int, str]:
    capsys.readouterr()
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out + captured.err


def test_damage_matrix_pristine_record_is_clean(pristine: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert validate(pristine) == []
    assert run(capsys, "repair", "--dry-run", str(pristine))[0] == 0
    status, out = run(capsys, "inspect", str(pristine))
    assert status == 0 and "DAMAGED" not in out


@pytest.mark.parametrize("mutation", MUTATIONS)
@pytest.mark.parametrize("kind", list(NODES))
def test_damage_matrix_cell(pristine: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                            kind: str, mutation: str) -> None:
    record = tmp_path / "d.mrec"
    shutil.copytree(pristine, record)
    damage(record, kind, mutation)
    _, node, hurt, intact = NODES[kind]

    status, out = run(capsys, "validate", str(record))
    assert status == 1 and node in out, out

    status, out = run(capsys, "repair", "--dry-run", str(record))
    assert status == 1, out
    assert "damaged: " in out and node in out and "NOT sound" in out, out

    status, out = run(capsys, "inspect", str(record))
    assert "system/" in out and "forcefield/" in out  # the record is listed
    if (kind, mutation) not in FOUND_BY_DECODING:
        assert "DAMAGED" in out and node.split("/")[-1] in out, out
    assert status == (1 if "DAMAGED" in out else 0), out  # damage marked: exit 1 (issue 36)

    status, out = run(capsys, "cat", str(record), "--frame", "0", "--block", intact)
    assert status == 0 and f"[{intact}]" in out, out
    status, out = run(capsys, "cat", str(record), "--frame", "0", "--block", hurt)
    assert status == 2, out  # refused, never fill values


def test_damage_matrix_repair_leaves_a_damaged_record_as_it_lies(pristine: Path, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """A real repair (not a dry run) of a damaged trajectory reports and changes nothing."""
    record = tmp_path / "d.mrec"
    shutil.copytree(pristine, record)
    damage(record, "chunk", "truncate")
    before = sorted((p.relative_to(record).as_posix(), p.read_bytes()) for p in record.rglob("*") if p.is_file())
    status, out = run(capsys, "repair", str(record))
    assert status == 1 and "damaged: " in out and "trajectory/atoms/x" in out, out
    after = sorted((p.relative_to(record).as_posix(), p.read_bytes()) for p in record.rglob("*") if p.is_file()
                   if not p.name.endswith(".molrec-lock"))
    assert after == before


def test_damage_trajectory_group_deleted_is_found(pristine: Path, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """trajectory/zarr.json deleted, its arrays left: validate and repair say what was lost
    (zarr-v3-subset#1: no implicit groups) instead of "valid" and "sound"."""
    record = tmp_path / "d.mrec"
    shutil.copytree(pristine, record)
    (record / "trajectory/zarr.json").unlink()
    found = validate(record)
    assert [(v.rule, v.node) for v in found] == [("zarr-v3-subset#1", "trajectory")], found
    assert "array(s) (atoms/_validity/dipole, atoms/dipole, atoms/x" in found[0].message
    status, out = run(capsys, "validate", str(record))
    assert status == 1
    status, out = run(capsys, "repair", "--dry-run", str(record))
    assert status == 1 and "damaged: trajectory/zarr.json: no zarr.json" in out, out
    status, out = run(capsys, "inspect", str(record))
    assert status == 1 and "DAMAGED trajectory: no zarr.json" in out, out


def test_damage_truncated_shard_costs_only_its_reads(pristine: Path, tmp_path: Path) -> None:
    """The issue's case: one shard of trajectory/atoms/x cut to half.  The reader opens and
    names the damage; every block but atoms reads, and a column subset of atoms without x."""
    record = tmp_path / "d.mrec"
    shutil.copytree(pristine, record)
    shard = record / "trajectory/atoms/x/c/0"
    shard.write_bytes(shard.read_bytes()[:shard.stat().st_size // 2])
    with MrecReader(record) as reader:
        assert list(reader.damaged()) == ["trajectory/atoms/x"]
        assert reader.read_columns(0, [("bonds", "atomi"), ("bonds", "atomj")])["bonds"].nrows == 8
        assert reader.read_columns(3, [("atoms", "y")])["atoms"]["y"].shape == (12,)
        with pytest.raises(Exception) as caught:
            reader[0]
        assert "trajectory/atoms/x" in str(caught.value)



def test_damage_survey_keeps_no_traceback_alive(pristine: Path, tmp_path: Path) -> None:
    """``verify(damage=...)`` keeps the refusals it meets for validate's survey; each is kept
    without its traceback (nor its causes'), whose frames would hold every chunk that read had
    decoded — a record with many damaged frames would hold that many reads' chunks."""
    record = tmp_path / "d.mrec"
    shutil.copytree(pristine, record)
    damage(record, "chunk", "flip")
    faults: List[Exception] = []
    with MrecReader(record) as reader:
        reader.verify(damage=faults)
    assert faults
    for exc in faults:
        chain = exc
        while chain is not None:
            assert chain.__traceback__ is None, repr(chain)
            chain = chain.__cause__ or chain.__context__

# The same kinds of node outside the trajectory: a section's group, an array's metadata, an
# unsharded chunk (a deleted one reads as its fill value, as Zarr says a missing chunk does:
# nothing outside a trajectory's commit says it was written, so it is not a cell here), and
# the meta section, without which no version is known (the trajectory's reads refuse too).
SECTION_NODES: Dict[str, Tuple[str, str]] = {
    "section-group": ("system/zarr.json", "system"),
    "section-array-metadata": ("system/atoms/mass/zarr.json", "system/atoms/mass"),
    "section-chunk": ("system/atoms/mass/c/0", "system/atoms/mass"),
    "meta-group": ("meta/zarr.json", "meta"),
}
SECTION_CELLS = [(kind, mutation) for kind in SECTION_NODES for mutation in MUTATIONS
                 if (kind, mutation) not in {("section-chunk", "delete"), ("meta-group", "delete")}]


@pytest.mark.parametrize("kind,mutation", SECTION_CELLS)
def test_damage_matrix_section_cell(pristine: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                    kind: str, mutation: str) -> None:
    record = tmp_path / "d.mrec"
    shutil.copytree(pristine, record)
    relative, node = SECTION_NODES[kind]
    target = record / relative
    data = bytearray(target.read_bytes())
    if mutation == "delete":
        target.unlink()
    elif mutation == "truncate":
        target.write_bytes(bytes(data[:len(data) // 2]))
    elif mutation == "zero":
        target.write_bytes(bytes(len(data)))
    else:  # a zarr.json carries no checksum: a bit flipped inside one of its strings is a
        # different value, found by no one; a flip of its structure is what can be found
        data[0 if relative.endswith("zarr.json") else len(data) // 2] ^= 0x10
        target.write_bytes(bytes(data))

    status, out = run(capsys, "validate", str(record))
    assert status == 1 and node in out, out
    status, out = run(capsys, "repair", "--dry-run", str(record))
    assert status == 1 and "damaged: " in out and node in out, out
    status, out = run(capsys, "inspect", str(record))
    assert "forcefield/" in out, out
    if kind != "section-chunk":
        assert "DAMAGED" in out, out
    assert status == (1 if "DAMAGED" in out else 0), out
    status, out = run(capsys, "cat", str(record), "--frame", "0", "--block", "bonds")
    if kind == "meta-group":
        assert status == 2, out  # no version known: the record is not read
    else:
        assert status == 0 and "[bonds]" in out, out


def test_damage_deleted_older_shard_is_refused_not_fill(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A shard of committed rows deleted from a record closed cleanly, not the tail one (the
    one opening checks): its reads refuse (zarr-v3-subset#7), validate and repair name it —
    never fill values (trajectory#10: the commit's writer stores every shard it lands in)."""
    import numpy as np

    import molrec_raw as mr
    from molrec_raw.errors import CorruptDataError
    from molrec_raw.record.trajectory import extents

    monkeypatch.setattr(extents, "INDEX_PAGE_CHUNKS", 1)  # one inner chunk per shard: many shards
    path = tmp_path / "s.mrec"
    schema = mr.SequenceSchema().declare_column("atoms", "x", "f64").declare_column("atoms", "y", "f64")
    with mr.MrecWriter(path, schema) as w:
        for i in range(60):
            w.append(mr.Frame({}, {"atoms": mr.Block({"x": np.arange(100.0) + i, "y": np.zeros(100)})}))
    shards = sorted((path / "trajectory/atoms/x/c").iterdir())
    assert len(shards) >= 3, shards
    shards[0].unlink()
    with MrecReader(path) as reader:
        assert reader.read_columns(0, [("atoms", "y")])["atoms"]["y"].shape == (100,)
        with pytest.raises(CorruptDataError, match="never written"):
            reader[0]
        assert reader[59]["atoms"]["x"][0] == 59.0  # a frame in a shard that is there
    found = validate(path)
    assert ("trajectory#10", "trajectory/atoms/x") in [(v.rule, v.node) for v in found], found


def test_damage_scan_follows_what_is_stored_not_the_claimed_shape(tmp_path: Path) -> None:
    """zarr-v3-subset#2: one edited number in an array's ``zarr.json`` (6 rows claimed as
    4,294,967,302 over six-row chunks, 715 million chunk positions, one stored) must not make
    ``validate`` walk, or hold, the chunk grid: it reports the record's damage within a memory
    cap the old walk exceeded by gigabytes (the fuzz campaign's memory bomb)."""
    import json
    import subprocess
    import sys

    import numpy as np

    import molrec_raw as mr

    record = tmp_path / "claimed.mrec"
    mr.write_mrec_frame(record, mr.Frame({}, {"atoms": mr.Block({"x": np.arange(6.0)})}))
    meta_path = record / "frame" / "atoms" / "x" / "zarr.json"
    meta = json.loads(meta_path.read_text())
    meta["shape"] = [4294967302]
    meta_path.write_text(json.dumps(meta))
    child = (
        "import resource, sys\n"
        "import molrec_raw as mr\n"
        "from molrec_raw.record.molrec import validate\n"
        "size = int(open('/proc/self/statm').read().split()[0]) * resource.getpagesize()\n"
        "resource.setrlimit(resource.RLIMIT_AS, (size + 512 * 2**20, size + 512 * 2**20))\n"
        "found = validate(sys.argv[1])\n"
        "print(len(found))\n"
    )
    done = subprocess.run([sys.executable, "-c", child, str(record)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert int(done.stdout.strip()) >= 1  # the block's rows no longer agree with its siblings' or the claim is named


# -- issue 36: damage costs only what needs it, and salvage keeps the rest -----------------
# A demo long enough that a trajectory shard holds several inner chunks (atoms/x: 7,200 rows
# in four inner chunks of 2,052 rows, 171 frames each).
FRAMES_PER_CHUNK = 171


@pytest.fixture(scope="module")
def long_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_demo(tmp_path_factory.mktemp("damage36") / "long.mrec", frames=600, molecules=4)


def _cut_after_inner_chunks(record: Path, array: str, keep: int) -> None:
    """Cut the shard ``c/0`` of ``array`` inside its inner chunk ``keep`` (chunks before it
    stay whole), as a copy cut short would."""
    from molrec_raw.zarr import open_group

    codec = open_group(record)[array].pipeline.sharding
    shard = record / array / "c" / "0"
    raw = shard.read_bytes()
    offset, nbytes = (int(v) for v in codec.decode_index(raw[:codec.index_size], len(raw))[keep])
    shard.write_bytes(raw[:offset + nbytes // 2])


def _same_frame(a, b) -> None:  # type: ignore[no-untyped-def]
    """Two frames hold the same values bit for bit: blocks (columns, masks), meta, cell."""
    import numpy as np

    assert sorted(a.blocks) == sorted(b.blocks)
    for name, block in a.blocks.items():
        other = b.blocks[name]
        assert sorted(block.columns) == sorted(other.columns) and sorted(block.masks) == sorted(other.masks)
        for column, values in [*block.columns.items(), *(("mask:" + k, v) for k, v in block.masks.items())]:
            theirs = other.columns[column] if not column.startswith("mask:") else other.masks[column[5:]]
            assert values.dtype == theirs.dtype and values.tobytes() == theirs.tobytes(), (name, column)
    assert {k: getattr(v, "value", v) for k, v in a.meta.items()} == {k: getattr(v, "value", v) for k, v in b.meta.items()}
    assert (a.box is None) == (b.box is None)
    if a.box is not None:
        for field in ("vectors", "origin"):
            assert np.asarray(getattr(a.box, field)).tobytes() == np.asarray(getattr(b.box, field)).tobytes()
        assert (a.box.boundary, a.box.defined) == (b.box.boundary, b.box.defined)


def test_damage_truncated_shard_keeps_the_frames_before_the_cut(long_run: Path, tmp_path: Path) -> None:
    """zarr-v3-subset#7, issue 36: a shard cut inside its inner chunk 2 loses that chunk and
    those after it only: every frame whose chunks lie before the cut reads (its values as in
    the whole record), a frame past it refuses naming the array, the shard key, the index
    entry and the rule; its other columns still read."""
    from molrec_raw.errors import CorruptDataError

    record = tmp_path / "d.mrec"
    shutil.copytree(long_run, record)
    _cut_after_inner_chunks(record, "trajectory/atoms/x", keep=2)
    intact = 2 * FRAMES_PER_CHUNK
    with MrecReader(long_run) as whole, MrecReader(record) as reader:
        assert list(reader.damaged()) == ["trajectory/atoms/x"]
        assert "inner chunk(s) from 2 to 3" in str(reader.damaged()["trajectory/atoms/x"])
        for i in (0, 1, FRAMES_PER_CHUNK, intact - 1):
            _same_frame(reader[i], whole[i])
        assert len(reader.read_frames(slice(0, intact))) == intact
        for i in range(intact):  # one by one in order: a chunk read ahead past the cut costs nothing
            reader[i]
        for i in (intact, len(reader) - 1):
            with pytest.raises(CorruptDataError) as caught:
                reader[i]
            assert caught.value.rule == "zarr-v3-subset#7" and caught.value.key == "trajectory/atoms/x/c/0"
            assert caught.value.node.strip("/") == "trajectory/atoms/x" and "entry " in caught.value.message
            assert reader.read_columns(i, [("atoms", "y")])["atoms"]["y"].shape == (12,)
        lost = [i for i, found in reader.frames_or_damage() if not hasattr(found, "blocks")]
        assert lost == list(range(intact, len(reader)))


def test_damage_salvage_writes_the_intact_frames_and_names_the_lost(long_run: Path, tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """issue 36: ``molrec-raw salvage`` of the cut record writes a new valid record holding
    exactly the frames that read, bit for bit, with their steps, times and the original pin
    (exit 1: frames were lost, each run named with its node); an existing OUT is refused
    without --force, and OUT is never the damaged record."""
    import json

    from molrec_raw.record.molrec import read_mrec
    from molrec_raw.record.salvage import SALVAGE_MODULE

    record = tmp_path / "d.mrec"
    shutil.copytree(long_run, record)
    _cut_after_inner_chunks(record, "trajectory/atoms/x", keep=2)
    intact = 2 * FRAMES_PER_CHUNK
    out = tmp_path / "saved.mrec"
    status, text = run(capsys, "salvage", str(record), str(out))
    assert status == 1, text
    assert f"lost: frames {intact}..599 ({600 - intact} frames): atoms/x" in text, text
    assert f"{intact} of 600 trajectory frame(s)" in text and "damaged: trajectory/atoms/x/c/0" in text, text
    status, text = run(capsys, "repair", "--dry-run", str(record))
    assert status == 1 and f"'molrec-raw salvage {record} OUT'" in text, text  # repair points at salvage
    assert validate(out) == []
    with MrecReader(long_run) as whole, MrecReader(out) as saved:
        assert len(saved) == intact and saved.schema == whole.schema
        assert saved.step == whole.step[:intact] and saved.time == whole.time[:intact]
        for i in range(intact):
            _same_frame(saved[i], whole[i])
    meta = read_mrec(out).meta
    assert meta["modules"][SALVAGE_MODULE]["frames_lost"] == [[intact, 599]]
    assert {k: v for k, v in meta.items() if k != "modules"} == \
        {k: v for k, v in read_mrec(long_run).meta.items() if k != "modules"}
    status, text = run(capsys, "salvage", str(record), str(out))
    assert status == 2 and "safety#overwrite" in text, text
    status, text = run(capsys, "salvage", str(record), str(out), "--force", "--json")
    report = json.loads(text)
    assert status == 1 and report["kept"] == intact
    assert report["lost_frames"] == [{"first": intact, "last": 599, "nodes": ["atoms/x"]}]
    status, text = run(capsys, "salvage", str(record), str(record), "--force")
    assert status == 2 and "never over the damaged one" in text, text
    status, text = run(capsys, "salvage", str(long_run), str(tmp_path / "whole.mrec"))
    assert status == 0 and "600 of 600" in text, text  # nothing lost: exit 0


@pytest.mark.parametrize("cell", ["truncated-shard", "index-flip", "section-chunk"])
def test_damage_validate_and_repair_count_damage_alike(long_run: Path, tmp_path: Path, cell: str) -> None:
    """issue 36: ``validate`` and ``repair`` report the damage of one survey, one entry per
    damaged chunk, so they give the same count (validate used to count the frames a damaged
    chunk costs, repair the chunks)."""
    from molrec_raw.record.repair import repair_mrec

    record = tmp_path / "d.mrec"
    shutil.copytree(long_run, record)
    if cell == "truncated-shard":
        _cut_after_inner_chunks(record, "trajectory/atoms/x", keep=1)
    elif cell == "index-flip":
        shard = record / "trajectory/atoms/y/c/0"
        data = bytearray(shard.read_bytes())
        data[20] ^= 0x10  # inside the index: its crc32c fails
        shard.write_bytes(bytes(data))
    else:
        chunk = record / "system/atoms/mass/c/0"
        data = bytearray(chunk.read_bytes())
        data[len(data) // 2] ^= 0x10
        chunk.write_bytes(bytes(data))
    found = validate(record)
    damaged = repair_mrec(record, dry_run=True).damaged
    assert len(found) == len(damaged) > 0, (found, damaged)
    assert sorted(v.node.strip("/") for v in found) == sorted(d.node for d in damaged)
    if cell == "truncated-shard":
        assert len(damaged) == 3  # inner chunks 1, 2 and 3 of trajectory/atoms/x


def test_damage_per_step_meta_shard_inspect_marks_it_and_cat_block_reads(pristine: Path, tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """issue 36: a per-step meta shard cut short — ``inspect`` marks the meta key DAMAGED and
    exits 1; ``cat --block B`` prints block B (it reads no meta: docs/guide/command-line.md),
    while a whole frame, which carries its meta, refuses."""
    record = tmp_path / "d.mrec"
    shutil.copytree(pristine, record)
    shard = record / "trajectory/meta/pe/c/0"
    shard.write_bytes(shard.read_bytes()[:INDEX_PAGE + 10])
    status, out = run(capsys, "inspect", str(record))
    assert status == 1 and "per-step meta pe: DAMAGED" in out, out
    for block in ("atoms", "bonds"):
        status, out = run(capsys, "cat", str(record), "--frame", "0", "--block", block)
        assert status == 0 and f"[{block}]" in out, out
    status, out = run(capsys, "cat", str(record), "--frame", "0")
    assert status == 2 and "trajectory/meta/pe" in out, out


def test_damage_cat_block_reads_when_another_blocks_shard_is_damaged(pristine: Path, tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """issue 36: ``cat --block bonds`` prints bonds when a shard of atoms (bonds refer to its
    rows) is cut short, and ``inspect`` marks the column and exits 1."""
    record = tmp_path / "d.mrec"
    shutil.copytree(pristine, record)
    shard = record / "trajectory/atoms/x/c/0"
    shard.write_bytes(shard.read_bytes()[:INDEX_PAGE + 10])
    status, out = run(capsys, "cat", str(record), "--frame", "-1", "--block", "bonds")
    assert status == 0 and "[bonds]" in out, out
    status, out = run(capsys, "inspect", str(record))
    assert status == 1 and "column x: DAMAGED" in out, out


def test_damage_salvage_leaves_out_a_section_that_does_not_read(pristine: Path, tmp_path: Path) -> None:
    """issue 36: a damaged chunk of the system section — salvage keeps every frame and every
    other section, leaves the system out and says so (its report, and OUT's meta)."""
    from molrec_raw import salvage_mrec
    from molrec_raw.record.molrec import read_mrec
    from molrec_raw.record.salvage import SALVAGE_MODULE

    record = tmp_path / "d.mrec"
    shutil.copytree(pristine, record)
    chunk = record / "system/atoms/mass/c/0"
    data = bytearray(chunk.read_bytes())
    data[len(data) // 2] ^= 0x10
    chunk.write_bytes(bytes(data))
    out = tmp_path / "saved.mrec"
    report = salvage_mrec(record, out)
    assert list(report.sections_lost) == ["system"] and "zarr-v3-subset#5.5" in report.sections_lost["system"]
    assert report.kept == list(range(12)) and not report.lost
    assert [d.key for d in report.damaged] == ["system/atoms/mass/c/0"]
    assert validate(out) == []
    saved, whole = read_mrec(out), read_mrec(pristine)
    assert saved.system is None and saved.forcefield == whole.forcefield
    assert saved.section_names() == [n for n in whole.section_names() if n != "system"]
    assert saved.meta["modules"][SALVAGE_MODULE]["sections_lost"] == ["system"]
