"""The conformance corpus read by the reference implementations (molrs 0.19, molpy 0.20).

Every valid case reads the same values in each peer as in ``expected.json`` (less what the
peer cannot express: tests/reference/reference_helpers.py ``PEER_BLIND``), except the rows
of the table "Valid cases a reference reads differently" in spec-notes/conformance.md; every
invalid case a peer accepts is a row of the table "Invalid cases a reference accepts" there.
The tables are parsed here, so a new disagreement, or a row that stops being one, fails.
Collection cases are not read: neither peer has a collection (LMDB) reader.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

molrs = pytest.importorskip("molrs", reason="molrs (molcrafts-molrs) ships wheels for CPython >= 3.12 only")
molpy = pytest.importorskip("molpy", reason="molpy (molcrafts-molpy) ships wheels for CPython >= 3.12 only")

from molrec_raw.conformance import default_corpus  # noqa: E402
from molrec_raw.conformance.canonical import first_difference  # noqa: E402
from reference_helpers import Peer, comparable, molpy_peer, molrs_peer, peer_dump  # noqa: E402

CORPUS = default_corpus()
NOTES = Path(__file__).resolve().parents[2] / "spec-notes" / "conformance.md"
PEERS = {"molrs": molrs_peer(molrs), "molpy": molpy_peer(molpy)}
COLUMN = {"molrs": 3, "molpy": 4}  # table columns: case, rule/what, why, molrs, molpy
DOCUMENT_SECTIONS = ("documents#",)  # status, method, metrics, observables: rules of documents §9


def _cases() -> List[dict]:
    return json.loads((CORPUS / "index.json").read_text(encoding="utf-8"))["cases"]


def _record_cases(valid: bool) -> List[dict]:
    return [c for c in _cases() if c["valid"] == valid and "collection.mrec.lmdb" not in c["forms"]]


def _table(title: str) -> Dict[str, List[str]]:
    """The rows of the spec-notes table under the heading ``title``: case -> cells."""
    text = NOTES.read_text(encoding="utf-8")
    start = text.index(f"### {title}")
    end = text.find("\n#", start + 4)
    rows = {}
    for line in text[start:end if end != -1 else None].splitlines():
        m = re.match(r"\|\s*`((?:in)?valid/[^`]+)`\s*\|", line)
        if m:
            rows[m.group(1)] = [cell.strip() for cell in line.strip().strip("|").split("|")]
    assert rows, f"no rows under {title!r} in {NOTES}"
    return rows


def _word(cell: str) -> str:
    return cell.split(":")[0].strip().strip("*").lower()


def _read(peer: Peer, path: Path) -> Tuple[bool, object]:
    try:
        return True, peer_dump(peer, path)
    except Exception as exc:  # a peer's refusal: ValueError, OSError, RuntimeError...
        return False, exc


@pytest.fixture(scope="module")
def valid_readings():
    """case -> peer -> 'same' or the first difference (both forms, directory and zip)."""
    out: Dict[str, Dict[str, str]] = {}
    for case in _record_cases(True):
        expected = json.loads((CORPUS / case["name"] / "expected.json").read_text(encoding="utf-8"))
        for name, peer in PEERS.items():
            verdict = "same"
            for form in case["forms"]:
                path = CORPUS / case["name"] / form
                ok, got = _read(peer, path)
                if not ok:
                    verdict = f"refuses {form}: {got}"
                    break
                difference = first_difference(comparable(expected, peer, path), comparable(got, peer))
                if difference is not None:
                    verdict = f"differs in {form}: {difference}"
                    break
            out.setdefault(case["name"], {})[name] = verdict
    return out


@pytest.fixture(scope="module")
def invalid_readings():
    """case -> peer -> 'refuses', 'accepts', or 'not read' (a document section the peer does
    not interpret)."""
    out: Dict[str, Dict[str, str]] = {}
    for case in _record_cases(False):
        for name, peer in PEERS.items():
            ok, _ = _read(peer, CORPUS / case["name"] / case["forms"][0])
            if not ok:
                verdict = "refuses"
            elif not peer.documents and case["rule"].startswith(DOCUMENT_SECTIONS):
                verdict = "not read"
            else:
                verdict = "accepts"
            out.setdefault(case["name"], {})[name] = verdict
    return out


def test_conformance_valid_corpus_reads_the_same_in_molrs_and_molpy(valid_readings):
    """Every valid record case (both forms) reads the expected values in both peers, floats
    bit for bit — but for the rows of the table, which must still differ."""
    table = _table("Valid cases a reference reads differently")
    for case, verdicts in valid_readings.items():
        for peer, verdict in verdicts.items():
            noted = _word(table[case][COLUMN[peer]]) if case in table else "same"
            assert verdict.split()[0] == noted, (
                f"{case} in {peer}: {verdict}; spec-notes/conformance.md says {noted!r}")
    assert set(table) <= set(valid_readings), sorted(set(table) - set(valid_readings))
    assert len(valid_readings) >= 60


def test_conformance_invalid_cases_the_peers_accept_are_the_table(invalid_readings):
    """Each invalid case a peer does not refuse is a row of the table, with the peer's answer
    (``accepts`` / ``not read`` / ``refuses``) as the table states it; no row is stale."""
    table = _table("Invalid cases a reference accepts")
    for case, verdicts in invalid_readings.items():
        if all(v == "refuses" for v in verdicts.values()):
            assert case not in table, f"{case}: every peer refuses it now; remove its row"
            continue
        assert case in table, f"{case}: {verdicts}; add a row to spec-notes/conformance.md"
        for peer, verdict in verdicts.items():
            assert _word(table[case][COLUMN[peer]]) == verdict, (
                f"{case} in {peer}: {verdict}; the table says {table[case][COLUMN[peer]]!r}")
        rule = next(c for c in _cases() if c["name"] == case)["rule"]
        assert rule in table[case][1], f"{case}: the row must cite {rule}"
    assert set(table) <= set(invalid_readings), sorted(set(table) - set(invalid_readings))


def test_conformance_collection_cases_are_listed_as_unreadable():
    """Collection cases are not silently left out: neither peer has a collection reader, and
    the notes say so."""
    collections = [c["name"] for c in _cases() if "collection.mrec.lmdb" in c["forms"]]
    assert collections
    assert not any(hasattr(peer.mrec, name) for peer in PEERS.values()
                   for name in ("CollectionReader", "read_collection"))
    text = NOTES.read_text(encoding="utf-8")
    assert "no collection (LMDB) reader" in text
