"""Shared fixtures: one Spark session for the whole test session, small deterministic data."""

from __future__ import annotations

import os
import sys

import pytest

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


@pytest.fixture(scope="session")
def spark():
    from spe.session import get_spark, stop_spark

    s = get_spark()
    yield s
    stop_spark()
