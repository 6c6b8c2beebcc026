"""The force-field section: documents §7, checklist documents#9.23–9.31, #9.35,
reference-behaviour §2.17."""
from __future__ import annotations

import copy
import re

import numpy as np
import pytest

from molrec_raw.errors import SpecViolationError
from molrec_raw.record.forcefield import (
    ForceFieldSection, block_name, blocks_equal, check_forcefield, decode_style, encode_style,
    parse_block_name, read_forcefield_group, write_forcefield_group,
)
from molrec_raw.record.frame_io import write_frame_group
from molrec_raw.record.model import Block, Frame
from molrec_raw.zarr import MemoryStore, open_group


def S(*values):
    return np.array(list(values), dtype=object)


def F(*values):
    return np.array(values, dtype=np.float64)


def root_of(tmp_path, name="x.mrec"):
    return open_group(tmp_path / name, mode="w")


def round_trip(tmp_path, section, name="x.mrec"):
    root = root_of(tmp_path, name)
    write_forcefield_group(root, section)
    return read_forcefield_group(open_group(tmp_path / name, mode="r")["forcefield"])


def write_unchecked(tmp_path, document, tables, name="bad.mrec"):
    """A store a careless producer could write: frame-shaped, but without force-field checks."""
    root = root_of(tmp_path, name)
    write_frame_group(root, "forcefield", Frame(meta=document, blocks=tables), typed_meta=False)
    return open_group(tmp_path / name, mode="r")["forcefield"]


def rules(section):
    return [v.rule for v in section.validate()]


def minimal(**extra_doc):
    doc = {"name": "mini", "units": {"preset": "real"}, "styles": [{"category": "atom", "style": "full"}]}
    doc.update(extra_doc)
    return ForceFieldSection(doc, {"atom.full": Block({"name": S("A", "B"), "mass": F(1.0, 2.0)})})


# -- the awkward force field of reference-behaviour §2.17 -----------------------------------------
def awkward() -> ForceFieldSection:
    document = {
        "name": "awkward",
        "units": {"length": "nm", "energy": "kJ/mol", "angle": "radian"},  # no preset
        "aromaticity_model": "OEAroModel_MDL",  # unknown key, kept in place
        "source": {"format": "openmm-xml", "uri": "file:///ff/awkward.xml", "sha256": "0123456789abcdef" * 4},
        "special_bonds": {"lj": [0.0, 0.0, 0.5], "coul": [0.0, 0.0, 0.8333333333333334]},
        "styles": [
            {"category": "atom", "style": "full"},
            {"category": "dihedral", "style": "periodic"},
            {"category": "pair", "style": "lj/cut/coul/long", "params": {"cutoff": 1.2, "mixing": "geometric",
                                                                        "coulomb": "pme"}},
            {"category": "bond", "style": "mmff_bond"},
        ],
        "zz_vendor": None,  # producer key holding null, preserved
    }
    tables = {
        "atom.full": Block(
            {"name": S("OW", "HW"), "mass": F(15.999, 1.008), "charge": F(-0.834, 0.417),
             "element": S("O", "")},
            masks={"element": np.array([True, False])},
        ),
        "dihedral.periodic": Block(
            {"name": S("X-c-c-X", "hc-c-c-hc"), "itom": S("", "hc"), "jtom": S("c", "c"), "ktom": S("c", "c"),
             "ltom": S("", "hc"), "k1": F(0.15, 0.2), "periodicity1": F(3.0, 3.0), "phase1": F(0.0, np.pi),
             "k2": F(0.25, -0.0)},
            masks={"k2": np.array([True, False])},
        ),
        "pair.lj%2Fcut%2Fcoul%2Flong": Block(
            {"name": S("OW", "HW"), "itom": S("OW", "HW"), "jtom": S("OW", "HW"),
             "epsilon": F(0.6364, -0.0), "sigma": F(0.315061, 5e-324)},
        ),
        "bond.mmff_bond": Block({"name": S(), "itom": S(), "jtom": S(), "k": F()}),
        "notes.free%20text": Block({"text": S("free text, ünïcode", "")}, attrs={"author": "someone"}),
    }
    return ForceFieldSection(document, tables)


def test_reference_2_17_awkward_forcefield_round_trips_bitwise(tmp_path):
    section = awkward()
    assert section.validate() == []
    back = round_trip(tmp_path, section)
    assert back.document == section.document
    assert list(back.document) == list(section.document)  # key order
    assert list(back.document["units"]) == ["length", "energy", "angle"]
    assert back.document["units"]["angle"] == "radian"  # carried, never converted (decision 11)
    assert back.tables.keys() == section.tables.keys()
    for name, table in section.tables.items():
        got = back.tables[name]
        assert blocks_equal(got, table), name
        for column, values in table.columns.items():
            assert got.columns[column].dtype == (object if values.dtype == object else values.dtype)
            if values.dtype.kind == "f":
                assert got.columns[column].tobytes() == values.tobytes()  # -0.0 and subnormals kept
    assert back.tables["dihedral.periodic"].masks["k2"].tolist() == [True, False]
    assert back.tables["atom.full"].masks["element"].tolist() == [True, False]
    assert back.tables["bond.mmff_bond"].count == 0
    assert back.tables["notes.free%20text"].attrs == {"author": "someone"}
    assert back == section
    assert back.validate() == []


def test_reference_2_17_awkward_forcefield_second_round_trip_identical(tmp_path):
    once = round_trip(tmp_path, awkward(), "a.mrec")
    twice = round_trip(tmp_path, once, "b.mrec")
    assert twice == once and list(twice.document) == list(once.document)


def test_reference_2_17_section_accessors():
    section = awkward()
    assert section.name == "awkward"
    assert [s["style"] for s in section.styles] == ["full", "periodic", "lj/cut/coul/long", "mmff_bond"]
    assert section.table("pair", "lj/cut/coul/long") is section.tables["pair.lj%2Fcut%2Fcoul%2Flong"]
    assert section.table("dihedral", "periodic")["itom"].tolist() == ["", "hc"]
    with pytest.raises(KeyError, match="bond.harmonic"):
        section.table("bond", "harmonic")
    assert ForceFieldSection.block_name("pair", "lj/cut") == "pair.lj%2Fcut"


def test_reference_2_17_plain_dict_is_a_type_error(tmp_path):
    root = root_of(tmp_path)
    with pytest.raises(TypeError, match="ForceFieldSection"):
        write_forcefield_group(root, {"name": "x"})
    assert "forcefield" not in root
    with pytest.raises(TypeError):
        ForceFieldSection(["not", "a", "mapping"])
    with pytest.raises(TypeError):
        ForceFieldSection({"name": "x"}, {"atom.full": {"name": ["A"]}})


def test_documents_9_32_values_carried_not_converted(tmp_path):
    section = minimal()
    section.document["units"] = {"length": "angstrom", "angle": "radian"}
    section.tables["angle.harmonic"] = Block({"name": S("a"), "itom": S("A"), "jtom": S("B"), "ktom": S("A"),
                                              "k": F(100.0), "theta0": F(1.9106332362490186)})
    section.document["styles"].append({"category": "angle", "style": "harmonic",
                                       "expression": "k*(theta-theta0)^2 ; junk that is never parsed ((("})
    back = round_trip(tmp_path, section)
    assert back.table("angle", "harmonic")["theta0"].tolist() == [1.9106332362490186]
    assert back.styles[1]["expression"] == section.styles[1]["expression"]


# -- block names (documents §7.5, #9.35) ----------------------------------------------------------
def test_documents_9_35_block_name_examples():
    assert block_name("pair", "lj/cut/coul/long") == "pair.lj%2Fcut%2Fcoul%2Flong"
    assert block_name("pair", "lj/cut") == "pair.lj%2Fcut"
    assert block_name("bond", "harmonic") == "bond.harmonic"
    assert block_name("notes", "free text") == "notes.free%20text"
    assert block_name("dihedral", "multi/harmonic") == "dihedral.multi%2Fharmonic"
    assert encode_style("a.b") == "a%2Eb"
    assert encode_style("x-y_Z9") == "x-y_Z9"
    assert encode_style("é") == "%C3%A9"
    assert encode_style("%") == "%25"


@pytest.mark.parametrize("style", ["lj/cut/coul/long", "a.b", "free text", "é/ü", "%25", "x-y_Z9", "*"])
def test_documents_9_35_parse_inverts_block_name(style):
    assert parse_block_name(block_name("pair", style)) == ("pair", style)
    assert decode_style(encode_style(style)) == style


def test_documents_9_35_parse_splits_at_first_dot():
    assert parse_block_name("pair.lj%2Fcut%2Fcoul%2Flong") == ("pair", "lj/cut/coul/long")
    assert parse_block_name("virtual_site.average2") == ("virtual_site", "average2")


@pytest.mark.parametrize("name", [
    "pair.lj%2fcut",  # lowercase hex
    "pair.lj%2",  # short
    "pair.lj%ZZcut",  # not hex
    "pair.lj%41",  # escapes a character written as itself
    "pair.lj/cut",  # unescaped reserved byte
    "pair.lj.cut",  # unescaped '.'
    "pair.%FF",  # not UTF-8
    "pairlj",  # no '.'
    "pair.",  # empty style
    "Pair.lj",  # category pattern
])
def test_documents_9_35_malformed_block_name_refused(name):
    with pytest.raises(SpecViolationError) as info:
        parse_block_name(name)
    assert info.value.rule == "documents#9.35"


def test_documents_9_35_unknown_blocks_preserved_not_refused(tmp_path):
    section = minimal()
    section.tables["pair14.lj%2Fcut"] = Block({"name": S("A-A"), "itom": S("A"), "jtom": S("A"), "epsilon": F(0.1)})
    section.tables["pair.lj%2fcut"] = Block({"whatever": np.array([1, 2], dtype=np.int32)})  # not a produced name
    section.tables["odd-name"] = Block({"anything": np.array([[1, 2]], dtype=np.int64)})
    assert section.validate() == []
    back = round_trip(tmp_path, section)
    assert back == section
    assert back.tables["pair14.lj%2Fcut"]["epsilon"].tolist() == [0.1]


def test_documents_7_7_pair14_is_just_an_unknown_category_when_styled(tmp_path):
    section = minimal()
    section.document["styles"].append({"category": "pair14", "style": "lj/cut"})
    section.tables["pair14.lj%2Fcut"] = Block({"name": S("A-A"), "itom": S("A"), "jtom": S("A"), "epsilon": F(0.1)})
    assert section.validate() == []
    assert round_trip(tmp_path, section) == section


# -- documents#9.23 name and units ------------------------------------------------------------------
def test_documents_9_23_missing_name_refused():
    section = minimal()
    del section.document["name"]
    assert rules(section) == ["documents#9.23"]
    section.document["name"] = 3
    assert rules(section) == ["documents#9.23"]


def test_documents_9_23_missing_units_refused(tmp_path):
    section = minimal()
    del section.document["units"]
    (v,) = section.validate()
    assert v.rule == "documents#9.23" and "units" in v.message
    with pytest.raises(SpecViolationError, match="units"):
        write_forcefield_group(root_of(tmp_path), section)


def test_documents_9_23_empty_units_refused_reference_form():
    section = ForceFieldSection({"name": "x", "units": {}})
    found = section.validate()
    assert found and found[0].rule == "documents#9.23" and "units" in found[0].message
    assert "documents#9.25" in [v.rule for v in found]  # no styles list either; all reported


@pytest.mark.parametrize("units", [
    {"preset": "lammps-real"},  # unknown preset
    {"preset": "real", "energy": "kJ/mol"},  # conflict
    {"preset": "real", "angle": "radian"},  # radian beside a preset (v2)
    {"preset": "openmm", "length": "angstrom"},
    {"preset": "lj", "length": "sigma"},  # lj allows only angle = degree
    {"preset": "lj", "angle": "radian"},
    {"preset": 2},
    {"length": 1.0},
    {"vendor_unit": "furlong"},  # unknown keys do not count as a quantity
    "real",
])
def test_documents_9_23_units_refused(units):
    section = minimal()
    section.document["units"] = units
    found = rules(section)
    assert found and set(found) == {"documents#9.23"}


@pytest.mark.parametrize("units", [
    {"preset": "real"},
    {"preset": "lj"},
    {"preset": "lj", "angle": "degree"},
    {"preset": "real", "energy": "kcal/mol", "angle": "degree"},
    {"preset": "micro", "energy": "picogram * micrometer**2 / microsecond**2"},
    {"preset": "openmm", "length": "nm", "energy": "kJ/mol"},
    {"energy": "eV"},
    {"length": "nm", "energy": "kJ/mol", "angle": "radian"},
    {"preset": "metal", "vendor_note": "kept"},
])
def test_documents_9_23_units_accepted(units, tmp_path):
    section = minimal()
    section.document["units"] = units
    assert section.validate() == []
    assert list(round_trip(tmp_path, section).document["units"].items()) == list(units.items())


def test_documents_9_23_units_refused_at_read(tmp_path):
    group = write_unchecked(tmp_path, {"name": "x", "units": {"preset": "real", "angle": "radian"}, "styles": []}, {})
    with pytest.raises(SpecViolationError, match="radian") as info:
        read_forcefield_group(group)
    assert info.value.rule == "documents#9.23"


# -- documents#9.24 source and special_bonds --------------------------------------------------------
@pytest.mark.parametrize("source", [
    {"uri": "x"},  # no format
    {"format": 3},
    {"format": "lammps", "sha256": "AB" * 32},  # uppercase
    {"format": "lammps", "sha256": "ab" * 31},  # short
    {"format": "lammps", "sha256": "g" * 64},
    {"format": "lammps", "uri": 7},
    "lammps",
])
def test_documents_9_24_source_refused(source):
    section = minimal(source=source)
    assert set(rules(section)) == {"documents#9.24"}


def test_documents_9_24_source_accepted_with_extra_keys(tmp_path):
    section = minimal(source={"format": "offxml", "sha256": "0" * 64, "retrieved": "2024-01-01"})
    assert section.validate() == []
    assert round_trip(tmp_path, section).document["source"]["retrieved"] == "2024-01-01"


@pytest.mark.parametrize("special", [
    {"lj": [0, 0, 0.5]},  # coul missing
    {"coul": [0, 0, 0.5]},
    {"lj": [0, 0.5], "coul": [0, 0, 0.5]},
    {"lj": [0, 0, 0.5, 1], "coul": [0, 0, 0.5]},
    {"lj": [0, 0, float("nan")], "coul": [0, 0, 0.5]},
    {"lj": [0, 0, True], "coul": [0, 0, 0.5]},
    {"lj": [0, 0, "0.5"], "coul": [0, 0, 0.5]},
    {"lj": [0, 0, 0.5], "coul": [0, 0, 0.5], "coul14": [0, 0, 1]},  # extra key
    [0, 0, 0.5],
])
def test_documents_9_24_special_bonds_refused(special):
    section = minimal(special_bonds=special)
    found = rules(section)
    assert "documents#9.24" in found and set(found) <= {"documents#9.24", "documents#9.4"}


def test_documents_9_24_special_bonds_accepted():
    assert minimal(special_bonds={"lj": [0, 0, 0.5], "coul": [0.0, 0.0, 0.8333]}).validate() == []


def test_documents_9_3_null_optional_key_read_as_absent_refused_at_write(tmp_path):
    section = minimal(source=None)
    assert section.validate() == []
    with pytest.raises(SpecViolationError, match="omit"):
        write_forcefield_group(root_of(tmp_path), section)
    group = write_unchecked(tmp_path, section.document, section.tables)
    assert read_forcefield_group(group).document["source"] is None


# -- documents#9.25 style entries -------------------------------------------------------------------
@pytest.mark.parametrize("entry", [
    {"category": "Bond", "style": "harmonic"},
    {"category": "1bond", "style": "harmonic"},
    {"category": "bond", "style": ""},
    {"category": "bond", "style": 5},
    {"category": "bond", "style": "harmonic", "endpoint_key": "residue"},
    {"category": "bond", "style": "harmonic", "params": {"k": [1.0, 2.0]}},
    {"category": "bond", "style": "harmonic", "params": {"k": {"v": 1}}},
    {"category": "bond", "style": "harmonic", "params": {"k": float("inf")}},
    {"category": "bond", "style": "harmonic", "params": {"k": True}},
    {"category": "bond", "style": "harmonic", "params": [1.0]},
    {"category": "bond", "style": "harmonic", "expression": 3},
    {"category": "pair", "style": "lj/cut", "params": {"mixing": "harmonic"}},
    {"category": "pair", "style": "my/pair", "params": {"special": "both"}},
    {"category": "pair", "style": "lj/charmm", "params": {"one_four": "scaled"}},
    "bond.harmonic",
])
def test_documents_9_25_style_entry_refused(entry):
    section = minimal()
    section.document["styles"].append(entry)
    if isinstance(entry, dict) and isinstance(entry.get("style"), str):
        section.tables[block_name(entry["category"], entry["style"])] = Block(
            {"name": S("AB"), "itom": S("A"), "jtom": S("B")})
    assert "documents#9.25" in rules(section)


def test_documents_9_25_missing_styles_refused():
    section = minimal()
    del section.document["styles"]
    assert rules(section) == ["documents#9.25"]
    section.document["styles"] = {"atom": "full"}
    assert rules(section) == ["documents#9.25"]


def test_documents_9_25_reserved_params_accepted(tmp_path):
    section = minimal()
    section.document["styles"] += [
        {"category": "pair", "style": "lj/charmm", "params": {"mixing": "arithmetic", "one_four": "epsilon14",
                                                              "inner": 8.0, "cutoff": 10.0}},
        {"category": "pair", "style": "my/coul", "params": {"special": "coul", "alpha": "0.3 nm"},
         "expression": "q1*q2/r", "endpoint_key": "type", "vendor": {"k": [1]}},
        {"category": "pair", "style": "lj/cut", "params": {"one_four": "anything: only checked on lj/charmm"}},
    ]
    for style in ("lj/charmm", "my/coul", "lj/cut"):
        section.tables[block_name("pair", style)] = Block({"name": S(), "itom": S(), "jtom": S()})
    assert section.validate() == []
    assert round_trip(tmp_path, section) == section


# -- documents#9.26 duplicates and missing tables ---------------------------------------------------
def test_documents_9_26_duplicate_style_refused():
    section = minimal()
    section.document["styles"].append({"category": "atom", "style": "full", "params": {"x": 1}})
    (v,) = section.validate()
    assert v.rule == "documents#9.26" and "atom" in v.message and "full" in v.message


def test_documents_9_26_missing_table_refused_at_write(tmp_path):
    section = awkward()
    del section.tables["dihedral.periodic"]
    (v,) = section.validate()
    assert v.rule == "documents#9.26" and "dihedral.periodic" in v.message
    root = root_of(tmp_path)
    with pytest.raises(SpecViolationError, match=re.escape("dihedral.periodic")):
        write_forcefield_group(root, section)
    assert "forcefield" not in root  # refused before the first byte


def test_documents_9_26_missing_table_refused_at_read(tmp_path):
    section = awkward()
    del section.tables["dihedral.periodic"]
    group = write_unchecked(tmp_path, section.document, section.tables)
    with pytest.raises(SpecViolationError, match=re.escape("dihedral.periodic")) as info:
        read_forcefield_group(group)
    assert info.value.rule == "documents#9.26"
    found = []
    back = read_forcefield_group(group, out=found)
    assert [v.rule for v in found] == ["documents#9.26"]
    assert back.document == section.document  # still handed back when collecting


def test_documents_9_26_zero_row_table_satisfies_a_style(tmp_path):
    section = minimal()
    section.document["styles"].append({"category": "bond", "style": "mmff_bond"})
    section.tables["bond.mmff_bond"] = Block()  # no columns, no rows
    assert section.validate() == []
    back = round_trip(tmp_path, section)
    assert back.tables["bond.mmff_bond"].count == 0 and back == section


# -- documents#9.27 table shape, names and endpoints ------------------------------------------------
def bond_section(**columns):
    section = minimal()
    section.document["styles"].append({"category": "bond", "style": "harmonic"})
    base = {"name": S("A-B", "B-B"), "itom": S("A", "B"), "jtom": S("B", "B"), "k": F(1.0, 2.0), "r0": F(1.0, 1.1)}
    base.update(columns)
    section.tables["bond.harmonic"] = Block({k: v for k, v in base.items() if v is not None})
    return section


def test_documents_9_27_valid_bond_table(tmp_path):
    section = bond_section()
    assert section.validate() == []
    assert round_trip(tmp_path, section) == section


def test_documents_9_27_structural_shape_refused(tmp_path):
    section = bond_section()
    section.tables["bond.harmonic"].structural_shape = (2, 1)
    assert rules(section) == ["documents#9.27"]
    with pytest.raises(SpecViolationError, match="structural_shape"):
        write_forcefield_group(root_of(tmp_path), section)
    group = write_unchecked(tmp_path, section.document, section.tables)
    with pytest.raises(SpecViolationError, match="structural_shape"):
        read_forcefield_group(group)


@pytest.mark.parametrize("columns, needle", [
    ({"name": None}, "no 'name'"),
    ({"name": F(1.0, 2.0)}, "string"),
    ({"name": S("A-B", "A-B")}, "unique"),
    ({"itom": None}, "exactly"),
    ({"ktom": S("A", "A")}, "exactly"),
    ({"jtom": None, "ktom": S("A", "A")}, "exactly"),
    ({"itom": np.array([1, 2], dtype=np.int64)}, "string"),
])
def test_documents_9_27_table_refused(columns, needle):
    section = bond_section(**columns)
    found = [v for v in section.validate() if v.rule == "documents#9.27"]
    assert found and any(needle in v.message for v in found), found


def test_documents_9_27_null_name_refused(tmp_path):
    section = bond_section()
    section.tables["bond.harmonic"].masks["name"] = np.array([True, False])
    (v,) = section.validate()
    assert v.rule == "documents#9.27" and "null" in v.message
    group = write_unchecked(tmp_path, section.document, section.tables)
    with pytest.raises(SpecViolationError, match="null"):
        read_forcefield_group(group)


def test_documents_9_27_null_endpoint_refused():
    section = bond_section()
    section.tables["bond.harmonic"].masks["jtom"] = np.array([False, True])
    (v,) = section.validate()
    assert v.rule == "documents#9.27" and "jtom" in v.message


def test_documents_9_27_wildcard_endpoint_is_not_null(tmp_path):
    section = bond_section(itom=S("", "B"))
    assert section.validate() == []
    assert round_trip(tmp_path, section).table("bond", "harmonic")["itom"].tolist() == ["", "B"]


def test_documents_9_27_wrong_arity_refused_at_read(tmp_path):
    section = bond_section(ktom=S("A", "B"))
    group = write_unchecked(tmp_path, section.document, section.tables)
    with pytest.raises(SpecViolationError, match="arity 2") as info:
        read_forcefield_group(group)
    assert info.value.rule == "documents#9.27"


@pytest.mark.parametrize("endpoints, ok", [
    ((), True), (("itom",), True), (("itom", "jtom", "ktom"), True),
    (("itom", "jtom", "ktom", "ltom", "mtom"), True), (("jtom",), False), (("itom", "ktom"), False),
])
def test_documents_9_27_unknown_category_endpoint_prefix(endpoints, ok):
    section = minimal()
    section.document["styles"].append({"category": "urey_bradley", "style": "x"})
    columns = {"name": S("t")}
    columns.update({e: S("A") for e in endpoints})
    section.tables["urey_bradley.x"] = Block(columns)
    assert (section.validate() == []) is ok


def smirks_section(**columns):
    section = minimal()
    section.document["styles"].append({"category": "bond", "style": "harmonic", "endpoint_key": "smirks"})
    base = {"name": S("b1"), "smirks": S("[#6:1]-[#6:2]"), "k": F(500.0), "r0": F(1.5)}
    base.update(columns)
    section.tables["bond.harmonic"] = Block({k: v for k, v in base.items() if v is not None})
    return section


def test_documents_9_27_smirks_keyed_table(tmp_path):
    section = smirks_section()
    assert section.validate() == []
    assert round_trip(tmp_path, section) == section
    assert "documents#9.27" in rules(smirks_section(itom=S("A"), jtom=S("B")))
    assert "documents#9.27" in rules(smirks_section(smirks=None))
    assert "documents#9.27" in rules(smirks_section(smirks=F(1.0)))
    masked = smirks_section()
    masked.tables["bond.harmonic"].masks["smirks"] = np.array([False])
    assert rules(masked) == ["documents#9.27"]


def test_documents_7_6_annotations_nullable_but_string():
    section = bond_section(desc=S("x", ""), doi=S("10.1/x", ""), overrides=S("A,B", ""))
    section.tables["bond.harmonic"].masks["desc"] = np.array([True, False])
    assert section.validate() == []
    assert rules(bond_section(desc=F(1.0, 2.0))) == ["documents#9.28"]


# -- documents#9.28 parameter columns ---------------------------------------------------------------
@pytest.mark.parametrize("column", [
    np.array([1, 2], dtype=np.int64),
    np.array([True, False]),
    np.array([1 + 2j, 3j], dtype=np.complex128),
    np.array([["a", "b"], ["c", "d"]], dtype=object),  # string[T, 2]
    np.zeros((2, 0)),  # zero-length axis
])
def test_documents_9_28_param_column_refused(column, tmp_path):
    section = bond_section(k=column)
    assert rules(section) == ["documents#9.28"]
    with pytest.raises(SpecViolationError):
        write_forcefield_group(root_of(tmp_path), section)
    group = write_unchecked(tmp_path, section.document, section.tables)
    with pytest.raises(SpecViolationError) as info:
        read_forcefield_group(group)
    assert info.value.rule == "documents#9.28"


def test_documents_9_28_precision_refused(tmp_path):
    section = bond_section()
    section.tables["bond.harmonic"].precision["k"] = 1e-3
    (v,) = section.validate()
    assert v.rule == "documents#9.28" and "precision" in v.message
    with pytest.raises(SpecViolationError, match="precision"):
        write_forcefield_group(root_of(tmp_path), section)
    group = write_unchecked(tmp_path, section.document, section.tables)
    with pytest.raises(SpecViolationError, match="precision"):
        read_forcefield_group(group)


def test_documents_9_28_array_param_round_trip_and_nonfinite_rows(tmp_path):
    coeffs = np.array([[1.0, 2.0, 3.0], [np.nan, np.inf, 0.0]])
    section = bond_section(coeffs=coeffs)
    (v,) = section.validate()
    assert v.rule == "documents#9.28" and "[1]" in v.message
    section.tables["bond.harmonic"].masks["coeffs"] = np.array([True, False])  # the row is null: fine
    assert section.validate() == []
    back = round_trip(tmp_path, section)
    assert back == section and back.table("bond", "harmonic")["coeffs"].shape == (2, 3)


def test_documents_9_28_string_and_canonical_params_accepted(tmp_path):
    section = minimal()
    section.tables["atom.full"].columns.update({
        "atomic_number": np.array([1, 8], dtype=np.int64),  # converted exactly to u64 on write
        "hybrid": S("sp3", ""),
        "charge": F(0.1, -0.1),
    })
    assert rules(section) == []
    back = round_trip(tmp_path, section)
    assert back.table("atom", "full")["atomic_number"].dtype == np.uint64
    stored_u64 = copy.deepcopy(back)
    assert stored_u64.validate() == []


def test_documents_9_28_canonical_key_wrong_dtype_refused():
    section = minimal()
    section.tables["atom.full"].columns["atomic_number"] = F(1.0, 8.0)
    found = section.validate()
    assert found and found[0].rule.startswith("frame-and-types#14.3")  # refused by as_column, as on write
    assert list(check_forcefield(section.document, section.tables))[0].rule == "documents#9.28"


# -- documents#9.29 cmap grid -----------------------------------------------------------------------
def cmap_section(grid):
    section = minimal()
    section.document["styles"].append({"category": "cmap", "style": "charmm"})
    section.tables["cmap.charmm"] = Block({"name": S("c1"), "itom": S("A"), "jtom": S("A"), "ktom": S("A"),
                                           "ltom": S("A"), "mtom": S("A"), "grid": grid})
    return section


def test_documents_9_29_cmap_grid_round_trip(tmp_path):
    section = cmap_section(np.arange(9.0).reshape(1, 3, 3))
    assert section.validate() == []
    assert round_trip(tmp_path, section) == section


@pytest.mark.parametrize("grid", [
    np.zeros((1, 1, 1)),  # N < 2
    np.zeros((1, 3, 4)),  # not square
    np.zeros((1, 9)),  # one trailing axis
    np.zeros((1, 3, 3), dtype=np.int64),
    np.full((1, 3, 3), np.nan),
])
def test_documents_9_29_cmap_grid_refused(grid, tmp_path):
    section = cmap_section(grid)
    assert rules(section) == ["documents#9.29"]
    group = write_unchecked(tmp_path, section.document, section.tables)
    with pytest.raises(SpecViolationError) as info:
        read_forcefield_group(group)
    assert info.value.rule == "documents#9.29"


def test_documents_9_29_grid_outside_cmap_is_an_array_param():
    assert bond_section(grid=np.zeros((2, 1, 3))).validate() == []


# -- documents#9.30 class-keyed styles --------------------------------------------------------------
def test_documents_9_30_class_keyed_style_needs_class_column(tmp_path):
    section = bond_section()
    section.document["styles"][1]["endpoint_key"] = "class"
    (v,) = section.validate()
    assert v.rule == "documents#9.30" and "atom.full" in v.message
    group = write_unchecked(tmp_path, section.document, section.tables)
    with pytest.raises(SpecViolationError, match="class"):
        read_forcefield_group(group)
    section.tables["atom.full"].columns["class"] = S("c", "c")
    assert section.validate() == []


# -- documents#9.31 pair restatements ---------------------------------------------------------------
def pair_section(epsilon_ba, mask=None):
    section = minimal()
    section.document["styles"].append({"category": "pair", "style": "lj/cut"})
    section.tables["pair.lj%2Fcut"] = Block(
        {"name": S("A-A", "A-B", "B-A"), "itom": S("A", "A", "B"), "jtom": S("A", "B", "A"),
         "epsilon": F(0.1, 0.2, epsilon_ba), "sigma": F(3.0, 3.1, 3.1), "desc": S("", "from paper", "restated")},
        masks={} if mask is None else {"epsilon": mask})
    return section


def test_documents_9_31_pair_restatement_conflict_refused(tmp_path):
    section = pair_section(0.3)
    (v,) = section.validate()
    assert v.rule == "documents#9.31"
    assert re.search(r'"A-B" and "B-A".*epsilon', v.message)
    with pytest.raises(SpecViolationError, match=r'"A-B" and "B-A".*epsilon'):
        write_forcefield_group(root_of(tmp_path), section)
    group = write_unchecked(tmp_path, section.document, section.tables)
    with pytest.raises(SpecViolationError, match=r'"A-B" and "B-A".*epsilon'):
        read_forcefield_group(group)


def test_documents_9_31_agreeing_restatement_accepted(tmp_path):
    section = pair_section(0.2)
    assert section.validate() == []
    assert round_trip(tmp_path, section) == section


def test_documents_9_31_null_equals_only_null():
    assert rules(pair_section(0.2, mask=np.array([True, True, False]))) == ["documents#9.31"]
    assert pair_section(0.9, mask=np.array([True, False, False])).validate() == []


# -- the rest -------------------------------------------------------------------------------------
def test_documents_7_1_meta_types_key_refused():
    section = minimal(_meta_types={"name": "string"})
    assert rules(section) == ["documents#7.1"]


def test_documents_9_4_document_finite_json():
    section = minimal(vendor={"x": float("nan")})
    assert rules(section) == ["documents#9.4"]


def test_validate_collects_every_violation_without_stopping():
    section = ForceFieldSection(
        {"name": 1, "units": {}, "source": {}, "styles": [
            {"category": "Bond", "style": "h"}, {"category": "bond", "style": "h"}, {"category": "bond", "style": "h"}]},
        {"bond.h": Block({"name": S("x", "x"), "itom": S("a", "b")}, structural_shape=(2,))},
    )
    found = {v.rule for v in section.validate()}
    assert {"documents#9.23", "documents#9.24", "documents#9.25", "documents#9.26", "documents#9.27"} <= found
    with pytest.raises(SpecViolationError):
        write_forcefield_group(open_group(MemoryStore(), mode="w"), section)


def test_fixture_valid_tip3p_like(tmp_path):
    section = ForceFieldSection(
        {"name": "tip3p", "units": {"preset": "real"}, "source": {"format": "lammps"},
         "special_bonds": {"lj": [0, 0, 0], "coul": [0, 0, 0]},
         "styles": [{"category": "atom", "style": "full"}, {"category": "bond", "style": "harmonic"},
                    {"category": "pair", "style": "lj/cut/coul/long", "params": {"cutoff": 10.0, "mixing": "arithmetic"}}]},
        {"atom.full": Block({"name": S("OW", "HW"), "charge": F(-0.834, 0.417), "element": S("O", "H"),
                             "mass": F(15.9994, 1.008)}),
         "bond.harmonic": Block({"name": S("OW-HW"), "itom": S("OW"), "jtom": S("HW"), "k": F(450.0), "r0": F(0.9572)}),
         "pair.lj%2Fcut%2Fcoul%2Flong": Block({"name": S("OW"), "itom": S("OW"), "jtom": S("OW"),
                                              "epsilon": F(0.102), "sigma": F(3.188)})},
    )
    assert section.validate() == []
    back = round_trip(tmp_path, section)
    assert back == section
    assert back.table("bond", "harmonic")["name"].tolist() == ["OW-HW"]


def test_fixture_valid_charmm_like(tmp_path):
    section = ForceFieldSection(
        {"name": "charmm", "units": {"preset": "real"}, "special_bonds": {"lj": [0, 0, 0], "coul": [0, 0, 0]},
         "styles": [{"category": "atom", "style": "full"}, {"category": "angle", "style": "charmm"},
                    {"category": "dihedral", "style": "charmm"}, {"category": "pair", "style": "lj/charmm"},
                    {"category": "pair", "style": "coul/cut"}]},
        {"atom.full": Block({"name": S("CT1", "NH1"), "mass": F(12.011, 14.007), "charge": F(0.07, -0.47)}),
         "angle.charmm": Block({"name": S("a"), "itom": S("CT1"), "jtom": S("NH1"), "ktom": S("CT1"),
                                "k": F(50.0), "theta0": F(120.0), "k_ub": F(0.0), "r_ub": F(0.0)},
                               masks={"k_ub": np.array([False]), "r_ub": np.array([False])}),
         "dihedral.charmm": Block({"name": S("d"), "itom": S(""), "jtom": S("CT1"), "ktom": S("NH1"), "ltom": S(""),
                                   "k": F(0.2), "periodicity": F(3.0), "phase": F(0.0), "w": F(1.0)}),
         "pair.lj%2Fcharmm": Block({"name": S("CT1", "NH1", "CT1-NH1"), "itom": S("CT1", "NH1", "CT1"),
                                    "jtom": S("CT1", "NH1", "NH1"), "epsilon": F(-0.02, -0.2, 0.0),
                                    "sigma": F(2.275, 1.85, 0.0), "epsilon14": F(-0.01, 0.0, -0.05),
                                    "sigma14": F(1.9, 0.0, 1.7)},
                                   masks={"epsilon": np.array([True, True, False]), "sigma": np.array([True, True, False]),
                                          "epsilon14": np.array([True, False, True]),
                                          "sigma14": np.array([True, False, True])}),
         "pair.coul%2Fcut": Block({"name": S(), "itom": S(), "jtom": S()})},
    )
    assert section.validate() == []
    back = round_trip(tmp_path, section)
    assert back == section
    assert back.tables["pair.lj%2Fcharmm"].masks["epsilon"].tolist() == [True, True, False]


def test_validate_reports_table_shape_problems_the_writer_refuses(tmp_path):
    section = bond_section()
    section.tables["bond.harmonic"].columns["k"] = F(1.0, 2.0, 3.0)
    section.tables["bond.harmonic"].count = None
    assert [v.rule for v in section.validate()] == ["frame-and-types#14.6"]
    with pytest.raises(SpecViolationError):
        write_forcefield_group(root_of(tmp_path), section)
    masked = bond_section()
    masked.tables["bond.harmonic"].masks["k"] = np.array([1, 0])
    assert [v.rule for v in masked.validate()] == ["frame-and-types#14.9"]


def test_frame_and_types_column_attributes_preserved(tmp_path):
    section = bond_section()
    section.tables["bond.harmonic"].column_attrs["k"] = {"unit_note": "kcal/mol/A^2", "source_line": 12}
    back = round_trip(tmp_path, section)
    assert back.tables["bond.harmonic"].column_attrs == {"k": {"unit_note": "kcal/mol/A^2", "source_line": 12}}
    assert back == section
