"""The MolRec record layer: documents, frame-shaped sections, force field, observables.

Uses only the public face of ``molrec_raw.zarr``.
"""
