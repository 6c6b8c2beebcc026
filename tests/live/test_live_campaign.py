"""The live campaign in 3 seconds (issue 12 §2; ``bench/live.py`` runs it for 20 s and
more): one writer process committing every frame (a durable flush every 10, a topology
change, a cell change, the step array born mid-run) and two reader processes refreshing
and reading random committed frames and the newest one.  No wrong frame, no error that is
not a MolrecError, and every reader follows the run to its end.  Timings and library
errors (reads refused after their retries) are reported, never asserted (a loaded 2-core
machine)."""
from __future__ import annotations

from pathlib import Path

import pytest

import live_campaign


@pytest.mark.campaign
def test_live_campaign_no_wrong_frames_and_no_foreign_errors(tmp_path: Path) -> None:
    report = live_campaign.run(tmp_path, seconds=3.0, readers=2)
    print({k: v for k, v in report.items() if k != "details"})
    assert report["wrong_frames"] == 0, report["details"]
    assert report["other_errors"] == 0, report["details"]
    # a library error (a read still refused after its bounded retries) is allowed, and reported
    assert report["saw_end"] and report["final_nstep"] == [report["frames"]] * 2
    assert report["frames"] >= live_campaign.STEPS_BREAK + 2 * live_campaign.DURABLE_EVERY  # every change happened
    assert report["reads"] >= 2 * report["frames"]  # each reader read the whole run at least once
    assert report["lag_samples"] > 0
