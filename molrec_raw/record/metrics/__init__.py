"""Metrics: live JSONL WAL, dense Zarr series with a catalog, and the host ``*.mlp.jsonl`` surface.

documents §4 (events, dense layout, safe names, catalog, densify) and §5 (WAL); README
decisions 8, 9, 10, 16.  Rule ids in docstrings and tests: ``documents#9.12`` etc.

    with MetricsWriter("run.mrec") as w:          # or MetricsWriter.for_host(run_dir)
        w.log("train/loss", 0.5, step=1)
    read_metrics("run.mrec")["train/loss"].values  # record dir, *.mrec.zip or *.mlp.jsonl
    for event in follow_metrics("run.mrec"): ...    # events as they are logged (a live run)
    discover_metrics(run_dir)                      # Discovered(metrics=..., records=..., ignored=...)
"""
from molrec_raw.record.metrics.follow import MetricEvent, follow_metrics
from molrec_raw.record.metrics.host import Discovered, discover_metrics
from molrec_raw.record.metrics.reader import check_metrics_group, read_metrics, read_metrics_group, read_wal_file
from molrec_raw.record.metrics.safe_name import decode_safe_name, encode_safe_name
from molrec_raw.record.metrics.series import Series
from molrec_raw.record.metrics.writer import MetricsWriter, host_wal_path

__all__ = [
    "Discovered", "MetricEvent", "MetricsWriter", "Series", "follow_metrics", "check_metrics_group", "decode_safe_name",
    "discover_metrics", "encode_safe_name", "host_wal_path", "read_metrics", "read_metrics_group",
    "read_wal_file",
]
