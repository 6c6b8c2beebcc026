"""Deterministic stores (issue 11): the batched write path — deferred precision rounding and
change detection, whole-commit zstd batches, vectorised shuffle — writes byte for byte the
stores the per-frame / per-chunk path wrote.  The expected digests were produced by the code
without that change (main at ef1f6ad, whose records carry a run status document; first taken at
6fb7b8e) from the same inputs (store_bytes_scenarios.py): regenerate them from main's code with
``PYTHONPATH=<main checkout>:tests/trajectory python -m store_bytes_scenarios``."""
import pytest

from store_bytes_scenarios import SCENARIOS, digest

EXPECTED = {
    "w1_coords_flush7": "d6de1fdb477bcce7dadbd1b3234b6946488059264ab5a97737168142ebc0a272",
    "w1_coords_auto": "de768a1c5a93965437d9d3aa0747b5d533b89f91d20fd25e3e055aa25d42c89d",
    "w5_small_auto": "2c5370f91e3c6655c230f8a3cdd271d659afb2fd66786b2ab3963404fc0567db",
    "w5_small_flush50": "d229eb8e6ce4417ce176914847a96e4acd408abea8376cb0292347eeb3394d79",
    "w5_small_flush1_nondurable": "ed65b5cff6b89eb80bac4755ffbb5238446d785ba71324fe0885cc7bac750de3",
    "coords_gzip": "4778d90b8c564bbb361a183177645ec3084c070b34a6bd9732bb2d0484597d13",
    "coords_zstd5": "896c42054fdcca90d7d406edda743aa437d7ea1754c0df34d7411af43960e0f5",
    "coords_none": "39023d75ef98a8901392e1602fd6edd785f90380afc4152775e6944844843fb7",
    "below_grid": "c3f624da2f75bae83bd0d223ef01f45ea53a7967b750b3ca02e0167ae18bccae",
    "mixed": "ccd8523f38a88bac8717b29c81551927a61250550a225f06cb2477b47cfc43f0",
    "reopened": "96e4bdfc0560e96e64ac12d0f2c4649d9f9cf169eccf8504e5603b02f59be5e9",
    "one_shot": "6f1894665a9d6466fdb767f86b8ce1b6780ba88c47ffff76dc3dc8fc5dec9266",
    "frame_record": "d6b0d5f166f6f7387dbb109bfc797aa3a2fdcc14f857d8bd8e3505571caf1388",
    "zarr_layer": "0286970d4e6bbbbe4edb92139b1bfd7adc13ca0983608566cb3f727871842d85",
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_store_bytes_unchanged_by_the_batched_path(tmp_path, name):
    """Writers are deterministic and the batch path changes no byte (trajectory §10, §12-§14)."""
    target = tmp_path / f"{name}.mrec"
    SCENARIOS[name](target)
    assert digest(target) == EXPECTED[name]


def test_every_scenario_has_an_expected_digest():
    assert set(EXPECTED) == set(SCENARIOS)
