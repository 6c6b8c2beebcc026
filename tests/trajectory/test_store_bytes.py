"""Deterministic stores (issue 11): the batched write path — deferred precision rounding and
change detection, whole-commit zstd batches, vectorised shuffle — writes byte for byte the
stores the per-frame / per-chunk path wrote.  The expected digests were produced by the code
before that change (main at 6fb7b8e) from the same inputs (store_bytes_scenarios.py)."""
import pytest

from store_bytes_scenarios import SCENARIOS, digest

EXPECTED = {
    "w1_coords_flush7": "520ed1226814820ea0e32112d39ce7606ee9cc4300dd28026100bbad2afa80e4",
    "w1_coords_auto": "c3f87b115c9a431aca3d0bbe2693abd6d34a87ec50d6aa5df7b7f302f739f6ec",
    "w5_small_auto": "80848bf4329fb755ad01381ae1498d222a6f65c51f8bc0e4fce8ccaec23872a6",
    "w5_small_flush50": "709d97197a6c0af6d316dfc4f68487c29a3b0d012244cafeaf1a931f8b7ba957",
    "w5_small_flush1_nondurable": "9f65858bf1a65aaaefc7f55bea014e1f638204981e05d462947950b2bf802834",
    "coords_gzip": "113aca3d8c87e9fac41a00f1f9b71a1575f7a16542aa474fdd6de0228d7b7e5d",
    "coords_zstd5": "296418fd19468c182df6be2d90ed60ef88dfd035512ebeaf627b229b38c2a8e7",
    "coords_none": "a580bb5a2aee414477ddf31666e648e97020329f5d043db441c8ceb5e6e29be5",
    "below_grid": "2647901bfd0154e2180855a955de276bd3b77b28e02fd38e8b70ed2b72026ddf",
    "mixed": "477a40ef187307d72d73327812cf4bf511a1f29d0e770fe51e1a786f1a7ed3b7",
    "reopened": "42e08d578307d84e8d6617b1957cf2a012b4dd97e1e5872b8bb9d109f50174f2",
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
