"""dask's own tests of its local schedulers, run against localsched.

One test per dask test module (``dask/tests/test_threaded.py``,
``test_multiprocessing.py``, ``test_local.py``, ``test_callbacks.py`` of the
installed dask), each run in a subprocess with dask's get functions and
Callback swapped for localsched's (how, and why that way:
``tests/dask_conformance/harness.py``); and ``dask.utils_test.
GetFunctionTestMixin``, dask's contract for any get function, on each of our
three schedulers.
"""

from __future__ import annotations

import pytest

from conftest import IN_CI
from tests.dask_conformance import harness

dask_utils_test = pytest.importorskip("dask.utils_test", reason="dask is not installed")

import localsched.local  # noqa: E402
import localsched.multiprocessing  # noqa: E402
import localsched.threaded  # noqa: E402

# (the processes scheduler's pool starts once for the module: conftest)
pytestmark = pytest.mark.pools_per_module


@pytest.fixture(scope="module")
def dask_tests_dir():
    path = harness.dask_tests_dir()
    if path is None or not (path / "test_local.py").exists():
        message = f"this dask install does not ship its tests (looked in {path})"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
    return path


@pytest.mark.timeout(300)
@pytest.mark.parametrize("module",
                         harness.DASK_TEST_MODULES + harness.DASK_DIAGNOSTICS_MODULES)
def test_dask_suite(module, dask_tests_dir, tmp_path):
    """dask's own tests of its local schedulers (``dask/tests/``) and of its
    diagnostics (``dask/diagnostics/tests/``), run on localsched's."""
    result = harness.run_suite(module, tmp_path, timeout=240)
    problems = result.problems()
    assert not problems, (
        f"dask's {module}.py against localsched: {len(problems)} did not pass\n"
        + "\n".join(problems)
    )
    # dask's tests of this module ran (none lost to a collection error).
    assert sum(o.outcome == "passed" for o in result.outcomes) >= 3


class TestGetSyncContract(dask_utils_test.GetFunctionTestMixin):
    get = staticmethod(localsched.local.get_sync)


class TestThreadedGetContract(dask_utils_test.GetFunctionTestMixin):
    get = staticmethod(localsched.threaded.get)


class TestProcessesGetContract(dask_utils_test.GetFunctionTestMixin):
    get = staticmethod(localsched.multiprocessing.get)
