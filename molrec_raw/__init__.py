"""molrec_raw — a from-scratch MolRec record library on a hand-rolled Zarr V3 subset."""
from molrec_raw import errors

__version__ = "0.1.0"

__all__ = ["errors", "__version__"]
