"""``molrec_raw.integrations.torch``: ``MrecDataset`` over a collection and its ``collate``,
against real PyTorch (the [torch] extra; on these machines torch 2.13.0 under Python 3.11 —
the CI's 3.11 job).  Without torch the module's ImportError names the extra."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List

import numpy as np
import pytest

pytest.importorskip("lmdb", reason="collections need the [lmdb] extra (pip install 'molrec-raw[lmdb]')")

import molrec_raw as mr  # noqa: E402
from molrec_raw.errors import MolrecError  # noqa: E402

HAVE_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not HAVE_TORCH, reason="needs torch (pip install 'molrec-raw[torch]'; "
                                 "torch==2.13.0 under Python 3.11 here)")
UNITS = {"length": "angstrom", "energy": "eV", "force": "eV/angstrom"}
SYMBOLS = np.array(["H", "C", "N", "O", "Cl"], dtype=object)
NUMBERS = {"H": 1, "C": 6, "N": 7, "O": 8, "Cl": 17}


def write_set(path: Path, sizes: List[int], frames: List[int], *, cells: bool = True) -> Dict[str, Any]:
    """A collection of ``len(sizes)`` records (``sizes[r]`` atoms, ``frames[r]`` frames; 0: no
    trajectory), and what every frame holds, by global frame ordinal."""
    rng = np.random.default_rng(3)
    truth: Dict[str, Any] = {"items": []}
    with mr.CollectionWriter(path, units=UNITS) as w:
        for r, (n, nf) in enumerate(zip(sizes, frames)):
            elements = SYMBOLS[rng.integers(0, len(SYMBOLS), n)]
            system = mr.Frame({}, {"atoms": mr.Block({"element": elements})})
            out, cell = [], None
            for k in range(nf):
                cols = {c: rng.normal(size=n) for c in ("x", "y", "z", "fx", "fy", "fz")}
                box = None
                if cells and k % 2 == 0:
                    box = cell = mr.Box(rng.normal(size=(3, 3)), np.zeros(3), (True, True, False), True)
                out.append(mr.Frame({"pe": float(rng.normal())}, {"atoms": mr.Block(cols)}, box))
                # the cell carries forward inside a record (ragged carry-forward)
                truth["items"].append((r, k, elements, cols, out[-1].meta["pe"], cell))
            w.add_record(system=system, frames=out if nf else None)
    return truth


def check_item(item: Dict[str, Any], expected: Any) -> None:
    import torch
    r, k, elements, cols, pe, box = expected
    assert item["record"].item() == r and item["frame"].item() == k
    assert item["positions"].shape == (len(elements), 3) and item["positions"].dtype == torch.float64
    np.testing.assert_array_equal(item["positions"].numpy(), np.stack([cols["x"], cols["y"], cols["z"]], 1))
    np.testing.assert_array_equal(item["forces"].numpy(), np.stack([cols["fx"], cols["fy"], cols["fz"]], 1))
    assert item["atomic_numbers"].tolist() == [NUMBERS[e] for e in elements]
    assert item["energy"].item() == pe
    if box is None:
        assert not item["cell"].any() and not item["pbc"].any()
    else:  # lattice vectors as rows (the record holds them as columns)
        np.testing.assert_array_equal(item["cell"].numpy(), box.vectors.T)
        assert item["pbc"].tolist() == [True, True, False]


@needs_torch
def test_items_are_the_collections_frames_as_tensors(tmp_path: Path) -> None:
    """One item per trajectory frame (records without a trajectory have none), the reader's
    view of it: positions, forces, atomic numbers from ``element``, energy from ``pe``, the
    cell as rows (``collection#C9``: system and trajectory ``atoms`` as one block)."""
    from molrec_raw.integrations.torch import MrecDataset
    truth = write_set(tmp_path / "s.mrec.lmdb", [3, 5, 2, 4], [2, 0, 3, 1])
    ds = MrecDataset(tmp_path / "s.mrec.lmdb")
    assert len(ds) == 6 == len(truth["items"])
    assert ds.keys == ("positions", "atomic_numbers", "forces", "energy", "cell", "pbc", "record", "frame")
    for j, expected in enumerate(truth["items"]):
        check_item(ds[j], expected)
    check_item(ds[-1], truth["items"][-1])
    with pytest.raises(IndexError):
        ds[6]


@needs_torch
def test_collate_concatenates_and_adds_batch_and_ptr(tmp_path: Path) -> None:
    """``collate``: per-atom tensors concatenated, per-item ones stacked, ``batch`` and ``ptr``
    (PyG); a batch read whole (``__getitems__``, items of different frame ordinals mixed)
    equals the items collated one by one, in the order asked."""
    import torch
    from molrec_raw.integrations.torch import MrecDataset, collate
    truth = write_set(tmp_path / "s.mrec.lmdb", [3, 5, 2, 4], [2, 1, 3, 1])
    ds = MrecDataset(tmp_path / "s.mrec.lmdb")
    order = [4, 0, 6, 2, 1, 5]  # frame ordinals 2, 0, 0, 0, 1, 1: three reads, put back in this order
    whole = MrecDataset.collate(ds.__getitems__(order))
    one_by_one = collate([ds[j] for j in order])
    assert set(whole) == set(one_by_one) == {*ds.keys, "batch", "ptr"}
    for name in whole:
        assert torch.equal(whole[name], one_by_one[name]), name
    sizes = [len(truth["items"][j][2]) for j in order]
    assert whole["ptr"].tolist() == np.concatenate([[0], np.cumsum(sizes)]).tolist()
    assert whole["batch"].tolist() == np.repeat(np.arange(len(order)), sizes).tolist()
    assert whole["positions"].shape == (sum(sizes), 3) and whole["cell"].shape == (6, 3, 3)
    assert whole["record"].tolist() == [truth["items"][j][0] for j in order]
    items = ds.__getitems__(order)
    assert len(items) == 6
    for i, j in enumerate(order):
        check_item(items[i], truth["items"][j])


@needs_torch
def test_a_batch_is_one_storage_of_disjoint_tensors(tmp_path: Path) -> None:
    """A batch read whole: every tensor a C-contiguous view of one storage (a worker's batch
    crosses to the parent as one shared segment), no two overlapping — writing into one
    leaves the others and the collection as they were — and a strings key still refused."""
    import torch
    from molrec_raw.integrations.torch import MrecDataset
    truth = write_set(tmp_path / "s.mrec.lmdb", [3, 5, 2, 4], [2, 1, 3, 1])
    ds = MrecDataset(tmp_path / "s.mrec.lmdb")
    order = [4, 0, 6, 2, 1, 5]
    whole = MrecDataset.collate(ds.__getitems__(order))
    pointers = {t.untyped_storage().data_ptr() for t in whole.values()}
    assert len(pointers) == 1, pointers
    spans = sorted((t.storage_offset() * t.element_size(), t.storage_offset() * t.element_size() + t.nbytes, name)
                   for name, t in whole.items())
    for (_, end, name), (start, _, after) in zip(spans, spans[1:]):
        assert end <= start, (name, after)
    assert all(t.is_contiguous() for t in whole.values())
    before = {name: t.clone() for name, t in whole.items()}
    whole["positions"].fill_(7.0)
    for name, t in whole.items():
        if name != "positions":
            assert torch.equal(t, before[name]), name
    for i, j in enumerate(order):  # the collection is untouched: a new read gives the frames
        check_item(ds[j], truth["items"][j])
    with pytest.raises(MolrecError, match="atoms/element"):
        MrecDataset(tmp_path / "s.mrec.lmdb", keys=["atoms/element"]).__getitems__([0])


@needs_torch
def test_keys_and_transform(tmp_path: Path) -> None:
    """``keys`` picks the names (also ``atoms/<column>`` and per-step meta keys); one the
    collection lacks is refused when the dataset is made; ``transform`` runs per item."""
    import torch
    from molrec_raw.integrations.torch import MrecDataset
    truth = write_set(tmp_path / "s.mrec.lmdb", [3, 4], [1, 1], cells=False)
    ds = MrecDataset(tmp_path / "s.mrec.lmdb", keys=["positions", "atoms/fx", "pe"],
                     transform=lambda item: {**item, "positions": item["positions"].float()})
    item = ds[1]
    assert set(item) == {"positions", "atoms/fx", "pe"}
    assert item["positions"].dtype == torch.float32
    np.testing.assert_array_equal(item["atoms/fx"].numpy(), truth["items"][1][3]["fx"])
    batch = MrecDataset.collate(ds.__getitems__([0, 1]))
    assert batch["positions"].shape == (7, 3) and batch["positions"].dtype == torch.float32
    assert batch["ptr"].tolist() == [0, 3, 7]
    with pytest.raises(MolrecError, match="velocities"):
        MrecDataset(tmp_path / "s.mrec.lmdb", keys=["velocities"])


@needs_torch
def test_dataloader_with_two_workers_reads_every_frame_once(tmp_path: Path) -> None:
    """``DataLoader(..., num_workers=2)``: each forked worker reads through its own LMDB
    environment (the reader it inherits reopens the file, lmdb#L1); a shuffled epoch gives
    every item exactly once with its own values.  Also with ``spawn`` workers (the dataset
    pickles as its path)."""
    import torch
    from torch.utils.data import DataLoader
    from molrec_raw.integrations.torch import MrecDataset
    sizes = [3 + r % 5 for r in range(40)]
    truth = write_set(tmp_path / "s.mrec.lmdb", sizes, [1 + r % 2 for r in range(40)])
    ds = MrecDataset(tmp_path / "s.mrec.lmdb")
    ds[0]  # the parent has used its environment before the workers fork
    for context in ("fork", "spawn"):
        loader = DataLoader(ds, batch_size=7, shuffle=True, num_workers=2, collate_fn=MrecDataset.collate,
                            multiprocessing_context=context, generator=torch.Generator().manual_seed(0))
        seen: List[int] = []
        for batch in loader:
            for i in range(len(batch["ptr"]) - 1):
                lo, hi = int(batch["ptr"][i]), int(batch["ptr"][i + 1])
                r, k = int(batch["record"][i]), int(batch["frame"][i])
                j = next(n for n, t in enumerate(truth["items"]) if t[0] == r and t[1] == k)
                item = {name: (v[lo:hi] if name in ("positions", "forces", "atomic_numbers") else v[i])
                        for name, v in batch.items() if name not in ("ptr", "batch")}
                check_item(item, truth["items"][j])
                seen.append(j)
        assert sorted(seen) == list(range(len(truth["items"]))), context


def test_importing_without_torch_names_the_extra(tmp_path: Path) -> None:
    """Without torch, importing the integration raises an ImportError that names the extra
    (a fresh interpreter in which ``import torch`` fails, whether or not torch is installed)."""
    code = ("import sys; sys.modules['torch'] = None\n"
            "try:\n    import molrec_raw.integrations.torch\nexcept ImportError as e:\n    print(e)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "pip install 'molrec-raw[torch]'" in done.stdout, done.stdout + done.stderr


@needs_torch
def test_bench_torch_epochs_runs_small(tmp_path: Path) -> None:
    """bench/collection.py --torch's code at a tiny size: every row comes out (no timing is
    asserted; the figures live in bench/README.md)."""
    import importlib.util as util
    bench_path = Path(__file__).resolve().parents[2] / "bench" / "collection.py"
    spec = util.spec_from_file_location("bench_collection_torch", bench_path)
    assert spec is not None and spec.loader is not None
    bench = util.module_from_spec(spec)
    sys.modules["bench_collection_torch"] = bench
    spec.loader.exec_module(bench)
    path = tmp_path / "b.mrec.lmdb"
    bench.write_molrec(bench.Data(64, 5, 0), path)
    out = bench.torch_epochs(path, 16, 1, 1, 0)
    assert {"c.batch", "dataloader", "first", "dataset_in_process"} <= set(out) and out["records"] == 64
    assert "DataLoader(MrecDataset), num_workers=1" in bench.torch_report(out)


@needs_torch
def test_units_stated_or_converted_and_named_frame_and_types_13_5(tmp_path: Path) -> None:
    """``ds.units`` names the unit of every key that has one; ``units=`` converts (through the
    package's one table, checked here against constants written out); a key whose unit the
    collection does not state is refused, naming it."""
    import pickle
    from molrec_raw.integrations.torch import MrecDataset
    truth = write_set(tmp_path / "s.mrec.lmdb", [3, 2], [2, 1])
    ds = MrecDataset(tmp_path / "s.mrec.lmdb")
    assert ds.units == {"positions": "angstrom", "forces": "eV/angstrom", "energy": "eV", "cell": "angstrom"}
    nm = MrecDataset(tmp_path / "s.mrec.lmdb", units={"length": "nm", "energy": "kJ/mol"})
    assert nm.units == {"positions": "nm", "forces": "kJ/mol/nm", "energy": "kJ/mol", "cell": "nm"}
    ev_in_kj_per_mol = 96.485332123310018
    for j, (_, _, _, cols, pe, box) in enumerate(truth["items"]):
        item = nm[j]
        np.testing.assert_allclose(item["positions"].numpy()[:, 0], cols["x"] / 10, rtol=1e-15)
        np.testing.assert_allclose(item["forces"].numpy()[:, 0], cols["fx"] * ev_in_kj_per_mol * 10, rtol=1e-12)
        assert item["energy"].item() == pytest.approx(pe * ev_in_kj_per_mol, rel=1e-12)
        if box is not None:
            np.testing.assert_allclose(item["cell"].numpy(), box.vectors.T / 10, rtol=1e-15)
    assert pickle.loads(pickle.dumps(nm)).units == nm.units
    with mr.CollectionWriter(tmp_path / "l.mrec.lmdb", units={"length": "angstrom"}) as w:
        w.add_record(system=mr.Frame({}, {"atoms": mr.Block({"element": SYMBOLS[:2]})}),
                     frames=[mr.Frame({"pe": 1.0}, {"atoms": mr.Block({c: np.zeros(2) for c in "xyz"})})])
    with pytest.raises(MolrecError, match="states no energy unit"):
        MrecDataset(tmp_path / "l.mrec.lmdb")
    assert MrecDataset(tmp_path / "l.mrec.lmdb", keys=["positions"]).units == {"positions": "angstrom"}
