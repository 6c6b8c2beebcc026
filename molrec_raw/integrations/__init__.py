"""Integrations with outside tools, one module per tool, above the record layer.

Each is an optional extra (``pip install 'molrec-raw[mdanalysis]'``); the core never imports
them, and importing one whose tool is missing raises an ImportError naming the extra.  Units,
cell orientation and vocabulary are shared through :mod:`molrec_raw.integrations.conventions`.
"""
