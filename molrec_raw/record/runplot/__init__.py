"""Pictures of a run, without a plotting library: the series to draw and the Vega-Lite artifact.

``panels`` (Panel, RunSeries: what is drawn, units, log scales), ``load`` (every series of a
record or host WAL), ``decimate`` (min/max per pixel bucket), ``vegalite`` (the Vega-Lite v5
specification, deterministic bytes, and the host's ``artifacts/<stem>.mlp.vl.json``).
Standard library and numpy only; matplotlib rendering is ``molrec_raw.plot``.  Nothing is
imported here, so the metrics writer can use ``vegalite`` without an import cycle.
"""
