#!/usr/bin/env python
"""Staging shards from a store vs a plain fsspec download of the same files (issue 35:
staging >= 0.9x a plain fsspec download).

SHARDS files of MIB MiB each (random bytes named ``part-<k>.mrec.lmdb``, each with the
``.sha256`` line the dataset builder writes beside it) are served on 127.0.0.1 by the
project's HTTP server (``molrec_raw.zarr.rangeserver``; ``--s3``: by moto's S3 server,
read through s3fs).  Each run, in alternating order:

- plain: ``fs.get(urls, local_paths)`` — fsspec's own bulk download (concurrent on its event
  loop) into a fresh directory, nothing checked;
- plain + checks: the same, then each file's SHA-256 read back and compared, and an fsync
  (the checks staging makes, done by hand after the download);
- staging: ``ShardCache(fresh_dir).stage(urls)`` — size listed, ``.sha256`` read, downloaded
  whole to a temporary name, size and SHA-256 checked, fsynced, renamed, locks taken.

Wall and CPU (``time.process_time``: this process, every thread — the server runs in this
process too, equally in both) per side; the ratio plain/staging is formed within each run
(>= 1 means staging is as fast).  The median and the range over RUNS runs are printed.

    python bench/staging.py [--shards 8] [--mib 32] [--runs 5] [--s3] [--no-digest] [--json out.json]
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

from molrec_raw.dataset.staging import ShardCache
from molrec_raw.zarr.rangeserver import serve_directory


def make_shards(root: Path, shards: int, mib: int, digests: bool = True) -> List[str]:
    names = []
    for k in range(shards):
        name = f"part-{k:05d}.mrec.lmdb"
        data = os.urandom(mib << 20)
        (root / name).write_bytes(data)
        if digests:
            (root / f"{name}.sha256").write_text(f"{hashlib.sha256(data).hexdigest()}  {name}\n")
        names.append(name)
    return names


def timed(work: Callable[[], Any]) -> Tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    work()
    return time.perf_counter() - wall, time.process_time() - cpu


def compare(urls: List[str], scratch: Path, runs: int, options: Dict[str, Any]) -> List[Dict[str, float]]:
    from fsspec.core import url_to_fs
    fs, _ = url_to_fs(urls[0], **options)
    paths = [url_to_fs(u, **options)[1] for u in urls]
    rows = []
    for run in range(runs):
        plain_dir, check_dir, cache_dir = scratch / f"plain-{run}", scratch / f"check-{run}", scratch / f"cache-{run}"
        plain_dir.mkdir()
        check_dir.mkdir()

        def plain() -> None:
            fs.get(paths, [str(plain_dir / Path(p).name) for p in paths])

        def checked() -> None:  # the same checks by hand after a plain download: SHA-256 read back, fsync
            fs.get(paths, [str(check_dir / Path(p).name) for p in paths])
            for p in paths:
                local = check_dir / Path(p).name
                digest = hashlib.sha256()
                with open(local, "rb") as fh:
                    for block in iter(lambda: fh.read(8 << 20), b""):
                        digest.update(block)
                fd = os.open(local, os.O_RDONLY)
                os.fsync(fd)
                os.close(fd)

        def staged() -> None:
            ShardCache(cache_dir, storage_options=options).stage(urls).release()

        sides = [("plain", plain), ("checked", checked), ("staging", staged)]
        if run % 2:
            sides.reverse()
        row: Dict[str, float] = {}
        for name, work in sides:
            row[f"{name}_wall"], row[f"{name}_cpu"] = timed(work)
        row["wall_ratio"] = row["plain_wall"] / row["staging_wall"]
        row["cpu_ratio"] = row["plain_cpu"] / row["staging_cpu"]
        row["checked_wall_ratio"] = row["checked_wall"] / row["staging_wall"]
        rows.append(row)
        for name in (plain_dir, check_dir, cache_dir):
            shutil.rmtree(name)
    return rows


def s3_server(root: Path, names: List[str]) -> Tuple[Any, Dict[str, Any], List[str]]:
    import logging

    import boto3
    from moto.server import ThreadedMotoServer
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's server logs every request
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="bench",
                          aws_secret_access_key="bench")
    client.create_bucket(Bucket="bench")
    for path in sorted(root.iterdir()):
        client.upload_file(str(path), "bench", f"shards/{path.name}")
    options = {"key": "bench", "secret": "bench", "client_kwargs": {"endpoint_url": endpoint, "region_name": "us-east-1"}}
    return server, options, [f"s3://bench/shards/{n}" for n in names]


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--mib", type=int, default=32)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--s3", action="store_true", help="moto's S3 server and s3fs instead of HTTP")
    parser.add_argument("--no-digest", action="store_true", help="no .sha256 beside the shards (size check only)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        root, scratch = Path(tmp, "served"), Path(tmp, "scratch")
        root.mkdir()
        scratch.mkdir()
        names = make_shards(root, args.shards, args.mib, not args.no_digest)
        if args.s3:
            server, options, urls = s3_server(root, names)
            try:
                rows = compare(urls, scratch, args.runs, options)
            finally:
                server.stop()
        else:
            with serve_directory(root) as http:
                rows = compare([http.url_of(n) for n in names], scratch, args.runs, {})
    total = args.shards * args.mib
    print(f"staging vs plain fsspec download: {args.shards} shards x {args.mib} MiB over "
          f"{'S3 (moto, s3fs)' if args.s3 else 'HTTP (rangeserver, fsspec http)'} on 127.0.0.1, {args.runs} runs"
          f"{', no .sha256 (size check only)' if args.no_digest else ''}")
    for i, r in enumerate(rows):
        print(f"  run {i}: plain {r['plain_wall']:.2f} s wall ({total / r['plain_wall']:.0f} MiB/s), "
              f"{r['plain_cpu']:.2f} s CPU | plain+checks {r['checked_wall']:.2f} s wall, {r['checked_cpu']:.2f} s CPU "
              f"| staging {r['staging_wall']:.2f} s wall "
              f"({total / r['staging_wall']:.0f} MiB/s), {r['staging_cpu']:.2f} s CPU | "
              f"ratio wall {r['wall_ratio']:.2f}x, CPU {r['cpu_ratio']:.2f}x")
    for key, what in (("wall_ratio", "wall, plain/staging (>= 0.9 asked)"), ("cpu_ratio", "CPU, plain/staging"),
                      ("checked_wall_ratio", "wall, (plain + SHA-256 + fsync by hand)/staging")):
        values = [r[key] for r in rows]
        print(f"  {what}: median {statistics.median(values):.2f}x, range {min(values):.2f}x-{max(values):.2f}x")
    if args.json:
        args.json.write_text(json.dumps({"shards": args.shards, "mib": args.mib, "s3": args.s3, "runs": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
