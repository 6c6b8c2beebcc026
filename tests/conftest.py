import pytest

from molrec_raw.zarr import MemoryStore


@pytest.fixture
def memstore():
    return MemoryStore()
