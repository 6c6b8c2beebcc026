import pytest


@pytest.fixture
def path(tmp_path):
    return tmp_path / "t.mrec"
