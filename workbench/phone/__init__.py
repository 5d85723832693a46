"""The offline phone: AutoGLM-Phone's action grammar (``actions``), its runtime message format (``runtime``), a
deterministic simulated Android phone with apps that keep state (``sim``, its apps ``apps``, ``state``; screens drawn
with PIL at any size, ``screen``), tasks judged on the final state with oracle solutions (``tasks``; a perturbed split
of them), the expert that answers from any state with the next step of a shortest path (``expert``), the gymnasium
environment over a phone (``env``) and a real phone over ADB with the same interface (``adb``, optional extra
``phone``).

Imports nothing of workbench above ``config``: the episode runner (``workbench.agent``), the scorers
(``workbench.eval``) and the data linter (``workbench.data``) build on it.
"""

from .actions import Action, ActionSyntaxError, format_action, parse_action, split_answer
from .sim import SimPhone
from .tasks import TASKS, PhoneTask, select_tasks

__all__ = [
    "Action",
    "ActionSyntaxError",
    "PhoneTask",
    "SimPhone",
    "TASKS",
    "format_action",
    "parse_action",
    "select_tasks",
    "split_answer",
]
