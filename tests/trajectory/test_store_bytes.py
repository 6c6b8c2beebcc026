"""Deterministic stores (issues 11, 23 and 27): the same input gives byte-identical stores.

``EXPECTED`` holds the digests of the current code from fixed inputs (store_bytes_scenarios.py;
regenerate: ``PYTHONPATH=tests/trajectory python -m store_bytes_scenarios``), and
``EXPECTED_UNALIGNED`` those of the same code with ``SECTOR_ALIGN = 1`` (no sector alignment:
the positional layout of issue 11, a shard's first chunk right after its index).  History of
deliberate changes: issue 11's batched write path changed no byte; issue 23 added the alignment
padding and nothing else (the unaligned digests were then those of main at ef1f6ad; a
durable=False writer pads at close too); issue 27 removed the written-rows stamp, and every
aligned store then differed from issue 23's only in the 12 bytes after each positional index
(the stamp, now zeros: same sizes, every chunk at the same offset) and in the marker of
``w5_small_flush50``, whose last commit was automatic: its manifest carries ``index_ends``
(compared file by file when the digests were renewed); the unaligned stores lost the 12 bytes
(their chunks moved up by 12)."""
import pytest

import molrec_raw.zarr.codecs.sharding as sharding
from store_bytes_scenarios import SCENARIOS, digest

EXPECTED = {
    "w1_coords_flush7": "2fcc91de21a4de12e99ed8aa3d8b734b4bf6e9e61e334849290afa15f24b2825",
    "w1_coords_auto": "2013b3bbb72936e114d397c98f01ecf366e599b5d2dca328136e60d6ac48c84c",
    "w5_small_auto": "2e700e937da00e822ffd1e65c08e9a747e8f8a18a7b8b9f10d657a1a5e202358",
    "w5_small_flush50": "f7f1d188185b8a2cf652e0e080fab13db0d41935837d9511fc96d04be360eb2c",
    "w5_small_flush1_nondurable": "d09601fac8647b7883c20a4b3b38393127b7358626665b9ee1066ca98d801175",
    "coords_gzip": "ba291dfcb6860883fe4a4677c6f373609dcc346d6d39276b0bb0122e577ed745",
    "coords_zstd5": "2daa995e3e0fb39158c300b680111c27d458ca8a99eb95fcbb731a82d341d728",
    "coords_none": "f77f1d240219dfc15c184da2c408f80981cb1f0d32e42042775e9abd8b9b998f",
    "below_grid": "6c88c65baa81a1fb78d6271cdd7a4667c321f9b8611959e7611bbdc3d18bfec4",
    "mixed": "6238539fc0d4207a97f433b5f8c7cb03eb3881a13e1eb3c4d4b6ba14ff6f3df6",
    "reopened": "fe87fb630a0b313c2b3e404781e2976704fb5733dcd6da062056d7d06984a281",
    "one_shot": "8edc3b978ab254520d8ef735456781dfeb517a4baa2b35a3b32055cd1c71d20a",
    "frame_record": "d6b0d5f166f6f7387dbb109bfc797aa3a2fdcc14f857d8bd8e3505571caf1388",
    "zarr_layer": "1ddb895fc2cbe6e5dd00de13d81f9c63a59e36f7623bdf7dfed548b3c4269651",
}

EXPECTED_UNALIGNED = {
    "w1_coords_flush7": "4d53b7a9729d8df8782d6edee242a09b30cb58d1b869ab96b5349e47fe33a448",
    "w1_coords_auto": "1b0a9ad1aed53cf7485c2be783467db2a805ffb2fb0fb1bd27da9c25eecc595b",
    "w5_small_auto": "7ab59056deece8f76d62dc71cb11eaf367ad3579536a6e7846d6e90ff15b3401",
    "w5_small_flush50": "2da4791e3f895ff569c2b3cde95649cceda4d72610698e5515a892646421011b",
    "w5_small_flush1_nondurable": "91713b68b301caa0b63b8c79f4d253597a65db4225bd7cb99fecdb43d93b06fe",
    "coords_gzip": "759cfb552ca50159dbe1a4b2e4b4f256acd83cebf37cc0054ffaadad0823a16a",
    "coords_zstd5": "cd297062337bf169b491801f628aa6ba54fb5adfe74a66e1cae54deca862de94",
    "coords_none": "0c64e13385c7b6f75b7ec0ca02598e0faf66f03076a91cca9781034db83b6dde",
    "below_grid": "a013cc26adc0fdee5b4a6fe37b9d37b7cb63a37bbe4e1eae6e9a590c08ad7c96",
    "mixed": "ef578e6e3214bf05c1710f2bb3c50deea8ae60d542175cec6e87b5ba05b64dee",
    "reopened": "bfa220bbae6a9032764e3f9f1acafcdc8f02832bf4863917e0c3a77209a46384",
    "one_shot": "fe48ea84191c4b58cac501ce1ef29b4136213f0e66cd2f8d0998f2a43effc012",
    "frame_record": "d6b0d5f166f6f7387dbb109bfc797aa3a2fdcc14f857d8bd8e3505571caf1388",
    "zarr_layer": "fb396a2eaf6d49bee525148ded97f0b7c39d3d7592acca8129139a9057681d7c",
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_store_bytes_unchanged_by_the_batched_path(tmp_path, name):
    """Writers are deterministic and the batch path changes no byte (trajectory §10, §12-§14)."""
    target = tmp_path / f"{name}.mrec"
    SCENARIOS[name](target)
    assert digest(target) == EXPECTED[name]


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_store_bytes_without_alignment_are_deterministic_too(tmp_path, monkeypatch, name):
    """Without sector alignment (the layout the power-cut tests use to show its holes), the
    same input gives the same bytes as well."""
    monkeypatch.setattr(sharding, "SECTOR_ALIGN", 1)
    target = tmp_path / f"{name}.mrec"
    SCENARIOS[name](target)
    assert digest(target) == EXPECTED_UNALIGNED[name]


def test_every_scenario_has_an_expected_digest():
    assert set(EXPECTED) == set(SCENARIOS) == set(EXPECTED_UNALIGNED)
