"""The landed-index check (zarr-v3-subset#7, trajectory#10; spec-notes/zarr.md "Positional
landings"): a commit marker that persisted while the index rewrite of a shard it relies on did
not must never be read — the old index is valid and checksummed, and would serve the fill value
(or a superseded inner chunk) for rows the commit wrote.

The simulator's ``omit-one`` states drop one pending write alone while later ones persist (a
reordering by the page cache): among them, the index rewrite of a shard under a marker that
persisted.  With the check, no state of the sample reads a wrong frame; with the recorded ends
ignored (a negative control, every index only checked for its checksum), some do.
"""
from __future__ import annotations

import random
from pathlib import Path
from typing import Any, Dict, Optional

import pytest

import molrec_raw.record.trajectory.recovery as recovery
from powercut_sim import TORN_4096, Outcome, enumerate_states
from powercut_workloads import WORKLOADS, check_states, record, sample_states

pytestmark = pytest.mark.forks  # the campaign's checkers fork (see tests/conftest.py)

SEED = 20261211
# States of the sample: the default run's (its negative control below still finds stale
# indexes read as data in it) and the campaign's (-m campaign; the default run's size before
# issue 36 trimmed it to fit the suite's time).
STATES = {"suite": 40, "campaign": 150}
JOBS = 2


def _omit_one(tmp_path: Path, wanted: int) -> Outcome:
    recorded = record(WORKLOADS["trajectory"](), tmp_path, TORN_4096)
    states = [s for s in enumerate_states(recorded.model, seed=SEED) if s.kind == "omit-one"]
    return check_states(recorded, sample_states(states, wanted, random.Random(1)), JOBS)


@pytest.mark.parametrize("share", ["suite", pytest.param("campaign", marks=pytest.mark.campaign)])
def test_trajectory_10_no_reordered_state_reads_a_stale_index_as_data(tmp_path: Path, share: str) -> None:
    outcome = _omit_one(tmp_path, STATES[share])
    print(outcome.table())
    assert outcome.total == STATES[share] and outcome.failed == 0


def test_trajectory_10_without_the_recorded_index_ends_a_stale_index_reads_as_data(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Negative control: the same states with the manifest's ``index_ends`` ignored."""
    checked = recovery.check_landed

    def checksum_only(array: Any, ends: Dict[str, Optional[int]], *args: Any, **kwargs: Any) -> None:
        checked(array, dict.fromkeys(ends), *args, **kwargs)

    monkeypatch.setattr(recovery, "check_landed", checksum_only)
    outcome = _omit_one(tmp_path, STATES["suite"])
    print(outcome.table())
    assert outcome.total == STATES["suite"] and outcome.failed > 0
    # wrong frames read silently (a missing shard the manifest writer must have stored is
    # refused on its own, as unreadable: that check does not depend on the recorded ends)
    assert "silent wrong frames" in {symptom for symptom, _ in outcome.violations}
