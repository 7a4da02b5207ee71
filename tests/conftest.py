"""Fixtures every test shares."""
import pytest


@pytest.fixture(autouse=True)
def resume_folder(tmp_path_factory, monkeypatch):
    """Resume files of the stages a test runs (in-process or under `dvc repro`) go to a folder of
    the test session, never to the user's cache."""
    folder = tmp_path_factory.mktemp("resume")
    monkeypatch.setenv("SATGROUND_RESUME_DIR", str(folder))
    return folder


@pytest.fixture(autouse=True)
def cpu_precision_of_the_test():
    """A stage run in-process keeps its satnet.precision and satnet.gemm for the process
    (satnet.check_setup): each test starts from SATGROUND_CPU_PRECISION and fp32 GEMMs again."""
    yield
    from satground.satnet import cpu, layer
    cpu._selected = None
    layer._gemm_dtype = None
