"""Task metrics of served models: scorers pluggable by name (``get_task``) and the harness that asks a server
(``evaluate``); results are stored with each adapter's run (``eval_results.json``). The action grammar the phone
scorers parse is ``workbench.phone.actions``."""

from .registry import get_task, register_task, task_names
from .task_protocol import Example, Task, load_eval_examples

__all__ = ["Example", "Task", "get_task", "load_eval_examples", "register_task", "task_names"]
