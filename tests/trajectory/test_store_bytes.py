"""Deterministic stores (issues 11 and 23): the same input gives byte-identical stores.

``EXPECTED_UNALIGNED`` holds the digests of the code before issue 23 (main at ef1f6ad, whose
records carry a run status document; first taken at 6fb7b8e: the batched write path of
issue 11 changed no byte of them) from the same inputs (store_bytes_scenarios.py).  Issue 23
ends positional shards and the metrics WAL at 4096-byte boundaries (sharding.SECTOR_ALIGN):
with ``SECTOR_ALIGN = 1`` the code writes exactly those old bytes again, which proves that
alignment padding is the only change; ``EXPECTED`` holds the aligned digests (the two
``durable=False`` scenarios, ``one_shot`` and ``w5_small_flush1_nondurable``, are aligned at
close since 0e1c7e8 and changed then; regenerate:
``PYTHONPATH=tests/trajectory python -m store_bytes_scenarios``)."""
import pytest

import molrec_raw.zarr.codecs.sharding as sharding
from store_bytes_scenarios import SCENARIOS, digest

EXPECTED = {
    "w1_coords_flush7": "053a563c67a8295dbfba86855e8a57cb5f35dda793af7b80039819ec03aad759",
    "w1_coords_auto": "7c123ca7f88e22464d2faf106cda32bcc56653317ad3081046028836f4505127",
    "w5_small_auto": "95cc9191d3891205ec76f7054e257d5a68214270260383eb58863b087493536a",
    "w5_small_flush50": "5924b16c9e6c42798d4c6f26388e5a9a2293ebd6ef5d0533122e6780f34a1e05",
    "w5_small_flush1_nondurable": "3c304c179ef47752189a1d199c0aefee4d619bc012d9bdd6309ad44b3cc4c831",
    "coords_gzip": "651a05cc287d257fb7ad10d006aa4127ae4d13b925053177bb52647a5f1a0c31",
    "coords_zstd5": "4f9a8f18acf3e7b6431a066f37b8c4f604f4108ef84fd20fdc969a064bee03e8",
    "coords_none": "bd3822a0057316ac2a1e80005596c121ee38b4fcac41ed563602bf1b88e133c7",
    "below_grid": "dfae7fcc1cb36fa88f941341d06e7001d9e43dbc6e2685a3dfd00dcad90fb49d",
    "mixed": "4f2190a791600261dadf7ab3073391edee2f9b58c19634244281b432c6ff04e9",
    "reopened": "021fb12e0df3175ab8d115421f57da45be5a21d1a3c814f968fd2cb0e238c03e",
    "one_shot": "1c97fc4a02e802d7621b43b492a2a2ad648363c04900d47da652c280cbd2c743",
    "frame_record": "d6b0d5f166f6f7387dbb109bfc797aa3a2fdcc14f857d8bd8e3505571caf1388",
    "zarr_layer": "a62285d9ec845f5a1de2025ac303914ea4f9666b8dd5aa40dcca96f5d6c20bf3",
}

EXPECTED_UNALIGNED = {
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


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_store_bytes_without_alignment_are_the_bytes_before_issue_23(tmp_path, monkeypatch, name):
    """Alignment padding is the only byte issue 23 changed: without it, the old bytes."""
    monkeypatch.setattr(sharding, "SECTOR_ALIGN", 1)
    target = tmp_path / f"{name}.mrec"
    SCENARIOS[name](target)
    assert digest(target) == EXPECTED_UNALIGNED[name]


def test_every_scenario_has_an_expected_digest():
    assert set(EXPECTED) == set(SCENARIOS) == set(EXPECTED_UNALIGNED)
