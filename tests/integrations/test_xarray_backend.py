"""The xarray backend ``engine="mrec"``: one block as a lazy, labelled dataset (trajectory
§9, §8.1, §8.4, §8.5; frame-and-types §3), from a directory, a zip or a URL."""
from __future__ import annotations

import pickle

import numpy as np
import pytest

xr = pytest.importorskip("xarray", reason="the xarray backend needs the [xarray] extra")

import molrec_raw as mr  # noqa: E402
from molrec_raw import MrecReader, MrecWriter, SequenceSchema  # noqa: E402
from molrec_raw.errors import InvalidValueError, MolrecError  # noqa: E402
from molrec_raw.zarr.rangeserver import serve_directory  # noqa: E402

FRAMES, ROWS = 30, 6


def _write_mixed(path):
    system = mr.Frame({}, {"atoms": mr.Block({"element": np.array(["O", "H"] * 3, dtype=object),
                                              "mass": np.tile([16.0, 1.0], 3)}, precision={"mass": 1e-3})})
    frame = mr.Frame({}, {"atoms": mr.Block({"x": np.arange(4.0)}, masks={"x": np.array([True, False, True, True])})})
    mr.write_mrec_frame(path, frame, system=system)
    schema = SequenceSchema().declare_block("atoms", rows=ROWS)
    schema.declare_column("atoms", "x", "f64").declare_precision("atoms", "x", 1e-3)
    schema.declare_column("atoms", "pos", "f64", (3,)).declare_column("atoms", "q", "f64")
    schema.declare_nullable("atoms", "q")
    schema.declare_block("bonds").declare_column("bonds", "atomi", "u64")
    rng = np.random.default_rng(3)
    with MrecWriter(path, schema, durable=False, flush_every=4) as w:
        for i in range(FRAMES):
            mask = np.ones(ROWS, bool)
            mask[i % ROWS] = i % 3 != 0
            atoms = mr.Block({"x": rng.normal(size=ROWS), "pos": rng.normal(size=(ROWS, 3)), "q": rng.normal(size=ROWS)},
                             masks={"q": mask})
            blocks = {"atoms": atoms}
            if i % 4 == 0:  # ragged, updated now and then
                blocks["bonds"] = mr.Block({"atomi": np.arange(i % 5, dtype=np.uint64)})
            w.append(mr.Frame({}, blocks), step=2 * i, time=0.1 * i)


@pytest.fixture(scope="module")
def records(tmp_path_factory, write_coordinates):
    root = tmp_path_factory.mktemp("xr")
    _write_mixed(root / "m.mrec")
    mr.pack_mrec_zip(write_coordinates(root / "c.mrec", 14, 1000))  # 3 frames per inner chunk
    mr.pack_mrec_zip(root / "m.mrec")
    with serve_directory(root) as server:
        yield root, server


def test_the_backend_is_registered_under_mrec():
    assert "mrec" in xr.backends.list_engines()


@pytest.mark.parametrize("where", ["dir", "zip", "http"])
def test_trajectory_9_a_fixed_block_is_a_frame_by_row_dataset(records, where):
    root, server = records
    location = {"dir": root / "m.mrec", "zip": root / "m.mrec.zip", "http": server.url_of("m.mrec.zip")}[where]
    ds = xr.open_dataset(location, engine="mrec", group="trajectory/atoms")
    with MrecReader(root / "m.mrec") as reader:
        assert ds.sizes == {"frame": FRAMES, "atoms": ROWS, "pos_dim0": 3}
        assert ds["x"].dims == ("frame", "atoms") and ds["pos"].dims == ("frame", "atoms", "pos_dim0")
        np.testing.assert_array_equal(ds["step"], reader.step)
        np.testing.assert_array_equal(ds["time"], reader.time)
        assert ds["x"].attrs == {"dtype": "f64", "precision": 1e-3} and ds["q"].attrs == {"dtype": "f64"}
        np.testing.assert_array_equal(ds["x"].values, reader.column_array("atoms", "x"))
        np.testing.assert_array_equal(ds["pos"][7:3:-2, ::2, [2, 0]].values,
                                      reader.column_array("atoms", "pos")[7:3:-2, ::2][:, :, [2, 0]])
        np.testing.assert_array_equal(ds["q_valid"].values, reader.mask_array("atoms", "q"))
        assert not ds["q_valid"].values.all()
        frame = reader[11].blocks["atoms"]
        np.testing.assert_array_equal(ds["q"].isel(frame=11).values, frame.columns["q"])
    ds.close()


def test_trajectory_9_reading_is_lazy(records):
    root, server = records
    ds = xr.open_dataset(server.url_of("m.mrec.zip"), engine="mrec", group="trajectory/atoms")
    before = server.requests
    value = ds["x"][17, 2].values
    assert server.requests - before <= 2  # x's shard index, then the one inner chunk holding it
    with MrecReader(root / "m.mrec") as reader:
        assert value == reader[17].blocks["atoms"].columns["x"][2]


def test_trajectory_9_chunks_follow_the_inner_chunks_and_pickle_for_dask(records):
    root, _ = records
    coords = xr.open_dataset(root / "c.mrec.zip", engine="mrec", group="trajectory/atoms", chunks={})
    assert coords["x"].chunks == ((3, 3, 3, 3, 2), (1000,))  # 3000-row inner chunks, 1000 rows a frame
    with MrecReader(root / "c.mrec") as reader:
        np.testing.assert_array_equal(coords["y"].data.compute(), reader.column_array("atoms", "y"))
    ds = xr.open_dataset(root / "m.mrec.zip", engine="mrec", group="trajectory/atoms", chunks={})
    with MrecReader(root / "m.mrec") as reader:
        np.testing.assert_array_equal(ds["x"].data.compute(), reader.column_array("atoms", "x"))
        again = pickle.loads(pickle.dumps(ds["pos"].data))  # holds the location, not an open file
        np.testing.assert_array_equal(again.compute(), reader.column_array("atoms", "pos"))


def test_trajectory_8_1_a_ragged_block_is_its_stored_rows_with_offsets(records):
    root, _ = records
    ds = xr.open_dataset(root / "m.mrec", engine="mrec", group="trajectory/bonds")
    assert set(ds.data_vars) == {"atomi", "offset", "step_index", "update_of_frame"}
    assert ds["atomi"].dims == ("bonds_row",)
    offsets, updates = ds["offset"].values, ds["update_of_frame"].values
    with MrecReader(root / "m.mrec") as reader:
        for i in range(FRAMES):
            j = updates[i]
            expected = reader[i].blocks["bonds"].columns["atomi"]
            np.testing.assert_array_equal(ds["atomi"][offsets[j]:offsets[j + 1]].values, expected)
        np.testing.assert_array_equal(ds["step_index"], reader.block_info("bonds").ordinals)


def test_frame_and_types_3_a_section_block_is_a_row_dataset(records):
    root, server = records
    for location in (root / "m.mrec", server.url_of("m.mrec.zip")):
        ds = xr.open_dataset(location, engine="mrec", group="system/atoms")
        system = mr.read_mrec_system(root / "m.mrec").blocks["atoms"]
        assert ds.sizes == {"atoms": ROWS} and ds.attrs["count"] == ROWS
        assert ds["element"].values.tolist() == system.columns["element"].tolist()
        np.testing.assert_array_equal(ds["mass"][1::2].values, system.columns["mass"][1::2])
        assert ds["mass"].attrs["precision"] == 1e-3
    ds = xr.open_dataset(root / "m.mrec.zip", engine="mrec", group="frame/atoms")
    assert ds.sizes == {"atoms": 4} and ds["x"].values.tolist() == [0.0, 1.0, 2.0, 3.0]
    assert ds["x_valid"].values.tolist() == [True, False, True, True]


def test_bad_groups_and_sources_are_refused(records):
    root, _ = records
    for group in (None, "trajectory", "trajectory/nope", "observables/x", "system/nope"):
        with pytest.raises((MolrecError, KeyError)):
            xr.open_dataset(root / "m.mrec", engine="mrec", group=group)
    with pytest.raises(InvalidValueError, match="local path or URL"):
        xr.open_dataset(mr.MrecReader, engine="mrec", group="trajectory/atoms")
    ds = xr.open_dataset(root / "m.mrec", engine="mrec", group="trajectory/atoms", drop_variables="pos")
    assert "pos" not in ds


def test_frame_and_types_13_5_values_as_stored_with_units_as_attributes(tmp_path):
    """Values are as stored; canonical columns and ``time`` name the record's units (derived
    ones spelled from them), mass and charge the spec's defaults; an unstated unit is no
    attribute, never a guess."""
    from molrec_raw.integrations.conventions import start_trajectory
    frame = mr.Frame({}, {"atoms": mr.Block({c: np.arange(3.0) for c in ("x", "y", "z", "fx", "fy", "fz")})})
    system = mr.Frame({"units": mr.MetaValue("json", {"preset": "real"})},
                      {"atoms": mr.Block({"mass": np.array([16.0, 1.0, 1.0])})})
    with start_trajectory(tmp_path / "real.mrec", system, SequenceSchema.from_frame(frame)) as w:
        w.append(frame, step=0, time=0.0)
        w.append(frame, step=1, time=2.0)
    with xr.open_dataset(tmp_path / "real.mrec", engine="mrec", group="trajectory/atoms") as ds:
        assert ds["x"].attrs["units"] == "angstrom" and ds["fx"].attrs["units"] == "kcal/mol/angstrom"
        assert ds["time"].attrs["units"] == "fs" and ds["x"].values[1, 2] == 2.0          # as stored
    with xr.open_dataset(tmp_path / "real.mrec", engine="mrec", group="system/atoms") as ds:
        assert ds["mass"].attrs["units"] == "dalton"
    mr.write_mrec_trajectory(tmp_path / "plain.mrec", [frame])
    with xr.open_dataset(tmp_path / "plain.mrec", engine="mrec", group="trajectory/atoms") as ds:
        assert "units" not in ds["x"].attrs and "units" not in ds["fx"].attrs
