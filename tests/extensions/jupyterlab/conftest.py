"""jupyter_server test fixtures (pytest-jupyter): a server in this process with the workbench extension enabled,
``jp_fetch`` to call it with the token, and its coroutine-test hooks, for the tests of this folder only."""

from pytest_jupyter.jupyter_server import *  # noqa: F401,F403
