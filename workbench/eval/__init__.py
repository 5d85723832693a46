"""Task metrics of served models: scorers pluggable by name (``get_task``) and the harness that asks a server
(``evaluate``); results are stored with each adapter's run (``eval_results.json``)."""
from .actions import Action, ActionSyntaxError, parse_action, split_answer
from .tasks import Example, Reply, Task, get_task, load_examples, register_task, task_names

__all__ = ["Action", "ActionSyntaxError", "Example", "Reply", "Task", "get_task", "load_examples", "parse_action",
           "register_task", "split_answer", "task_names"]
