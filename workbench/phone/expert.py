"""The expert: from any state of the simulated phone, the next action of a shortest path to a task's final-state
checks, and that path's length. It answers where the fixed oracle (``PhoneTask.oracle``: one solution from the
task's start) cannot: at the states an agent reaches by its own mistakes (DAgger's labels, preference pairs), and
with the length of a shortest path from the start (the shortest-path reward).

A breadth-first search over the phone's actions from the state on show, every state hashed (``SimPhone.key``: the
data, the screen on show, the focused field, the drafts, an open menu) so that none is expanded twice. The actions
tried at a state are the gestures its elements answer (a tap, a double tap, a long press at each element's centre),
a Type of each text the task names (its message or query) while a field has the focus, a Launch of each app the task
uses, the oracle's swipes (a home page along, a list by 450 grid units either way), Wait while a page loads, Back
and Home. Two cuts keep it small, neither of which can lengthen a shortest path to the checks: no action that
opens an app the task does not use (nor one whose data the state has changed against the task: ``state.key_app``,
where it can be undone), and none that changes what the task did not ask to change (a key of
``PhoneState.changed_keys`` outside the task's own that the state before it did not have changed already: such a
change fails ``nothing_else_changed`` until undone, and undoing it costs steps).

Where no path reaches every check (the agent changed something that cannot be undone: a message sent to the wrong
contact, a song started that nobody asked for), the expert takes the shortest path to the task's own goals that
changes nothing more, with ``solves`` False. Where the fixed oracle's path passes through the state and is a
shortest one from there, the expert gives the oracle's step (its action and reasoning), so that its labels agree
with the demonstrations wherever the demonstrations are right. Answers are kept per task and state: every state of a
path found is answered at once.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from .actions import Action
from .openautoglm import HOME
from .sim import SimPhone, installed_app
from .state import PhoneState, key_app
from .tasks import PhoneTask, centre

MAX_DEPTH = 30  # levels searched before the expert gives up (the longest oracle solution has 13 steps)
UNDO_MARGIN = 6  # levels searched past the first path to the goals alone, for one that also undoes a change
HOME_SWIPES = (([800, 600], [200, 600]), ([200, 600], [800, 600]))  # to the next home page, to the previous one
LIST_SWIPES = (([500, 800], [500, 350]), ([500, 350], [500, 800]))  # further down a list, back up


_SET_FIELDS = ("favorites", "liked_songs", "liked_photos")  # the state's sets (PhoneState)


def _no_worse(bad: dict[str, int], than: dict[str, int]) -> bool:
    """Nothing more off than ``than`` is: no new key changed, none further off."""
    return all(k in than and n <= than[k] for k, n in bad.items())


@dataclass(frozen=True)
class ExpertStep:
    """The expert's answer at one state: the action, its reasoning, and how many steps a shortest path from here
    takes (this action and the final ``finish`` included). ``solves``: the path ends with every check holding;
    False where none can (it reaches the task's goals, changing nothing more)."""

    action: Action
    thinking: str
    steps_left: int
    solves: bool = True


@dataclass
class _Node:
    snapshot: object
    parent: tuple | None
    action: Action | None
    effect: str
    element: str | None


def replay(task: PhoneTask, actions: Sequence[Action | None], phone: SimPhone | None = None) -> SimPhone:
    """A phone in the state ``actions`` leave from ``task``'s start (None: a step that did nothing, skipped; finish
    ends nothing here): the phone an agent left, rebuilt from what it did. ``phone``: reuse this one."""
    phone = phone or SimPhone()
    phone.reset(task.initial_state())
    for action in actions:
        if action is not None and action.type != "finish":
            phone.execute(action)
    return phone


class Expert:
    """Answers ``step(task, phone)`` (the next action from the state ``phone`` holds; ``phone`` is not changed),
    ``path(task, phone)`` (every step from there to finish) and ``shortest(task)`` (a shortest path's length from the
    task's start, finish included). ``searches`` and ``expanded`` count the work done (states expanded)."""

    def __init__(self, max_depth: int = MAX_DEPTH):
        self.max_depth = max_depth
        self.scratch = SimPhone()
        self.searches = self.expanded = 0
        self._answers: dict[tuple, ExpertStep] = {}  # (task, state key) -> the answer there
        self._starts: dict[PhoneTask, PhoneState] = {}
        self._oracle: dict[PhoneTask, dict[tuple, tuple[int, object]]] = {}  # state key -> (step index, OracleStep)

    # ---- answers -----------------------------------------------------------------------------------------------
    def step(self, task: PhoneTask, phone: SimPhone) -> ExpertStep:
        key = (task, phone.key())
        if key not in self._answers:
            self._search(task, phone.snapshot())
        answer = self._answers[key]
        on_oracle = self._oracle_states(task).get(key[1])
        if on_oracle is not None and answer.solves:
            index, oracle_step = on_oracle
            if len(task.oracle()) - index == answer.steps_left:  # the demonstration's step is a shortest one here
                return ExpertStep(oracle_step.action, oracle_step.thinking, answer.steps_left)
        return answer

    def path(self, task: PhoneTask, phone: SimPhone | None = None) -> list[ExpertStep]:
        """The expert's steps from ``phone``'s state (default: the task's start) to its finish, played on a copy."""
        play = self.scratch_copy(task, phone)
        steps = []
        while True:
            step = self.step(task, play)
            steps.append(step)
            if step.action.type == "finish":
                return steps
            play.execute(step.action)

    def shortest(self, task: PhoneTask) -> int:
        """The length of a shortest path from the task's start (finish included): at most the oracle's."""
        return self.step(task, replay(task, [], self.scratch)).steps_left

    def scratch_copy(self, task: PhoneTask, phone: SimPhone | None) -> SimPhone:
        play = SimPhone()
        if phone is None:
            play.reset(task.initial_state())
        else:
            play.restore(phone.snapshot())
        return play

    # ---- the search ----------------------------------------------------------------------------------------------
    def _start(self, task: PhoneTask) -> PhoneState:
        if task not in self._starts:
            self._starts[task] = task.initial_state()
        return self._starts[task]

    def _oracle_states(self, task: PhoneTask) -> dict[tuple, tuple[int, object]]:
        if task not in self._oracle:
            phone, states = replay(task, []), {}
            for index, step in enumerate(task.oracle()):
                states.setdefault(phone.key(), (index, step))
                phone.execute(step.action)
            self._oracle[task] = states
        return self._oracle[task]

    def _bad(self, task: PhoneTask, phone: SimPhone) -> dict[str, int]:
        """What the phone changed that the task did not ask for: each such key of ``changed_keys`` with how far it is
        off (a set's elements added or removed; 1 for any other field)."""
        start = self._start(task)
        keys = phone.state.changed_keys(start) - set(task.spec.changes(task.params))
        return {k: len(getattr(phone.state, k) ^ getattr(start, k)) if k in _SET_FIELDS else 1 for k in keys}

    def _search(self, task: PhoneTask, snapshot) -> None:
        """Breadth-first from ``snapshot`` to a state where every check holds (else, within ``UNDO_MARGIN`` levels of
        the first state where the task's goals hold changing nothing more, that one); its path's answers kept."""
        self.searches += 1
        phone, start = self.scratch, self._start(task)
        phone.restore(snapshot)
        root = phone.key()
        nodes = {root: _Node(snapshot, None, None, "", None)}
        bad_root = self._bad(task, phone)
        apps = (HOME, *task.apps, *{key_app(k) for k in bad_root})  # where the task is done, and where to undo
        fallback, frontier, limit = None, [root], self.max_depth
        for depth in range(self.max_depth + 1):
            for key in frontier:
                phone.restore(nodes[key].snapshot)
                if all(task.check(phone, start).values()):
                    return self._keep(task, nodes, key, solves=True)
                if (
                    fallback is None
                    and all(task.spec.goals(phone, task.params).values())
                    and _no_worse(self._bad(task, phone), bad_root)
                ):
                    fallback, limit = key, min(self.max_depth, depth + UNDO_MARGIN)
            if depth >= limit:
                break
            frontier = self._expand(task, nodes, frontier, apps)
        if fallback is None:
            raise RuntimeError(f"the expert found no way to the goals of {task.id} within {self.max_depth} steps")
        self._keep(task, nodes, fallback, solves=False)

    def _expand(self, task: PhoneTask, nodes: dict, frontier: list, apps: tuple) -> list:
        """The states one action away from ``frontier`` not seen before, added to ``nodes``; the cuts: no app
        outside ``apps``, no change the task did not ask for that the state before did not have already."""
        phone, out = self.scratch, []
        for key in frontier:
            self.expanded += 1
            snapshot = nodes[key].snapshot
            phone.restore(snapshot)
            bad, screen, changed = self._bad(task, phone), phone.screen(), False
            for action in list(moves(phone, task, screen, apps)):
                if changed:
                    phone.restore(snapshot)
                outcome = phone.execute(action, screen)  # its handlers act on whatever the phone holds: the same
                changed = outcome.valid  # an action that did nothing left the phone as it was
                if not outcome.valid or phone.app not in apps:
                    continue
                child = phone.key()
                if child in nodes or not _no_worse(self._bad(task, phone), bad):
                    continue
                nodes[child] = _Node(phone.snapshot(), key, action, outcome.effect, outcome.element)
                out.append(child)
        return out

    def _keep(self, task: PhoneTask, nodes: dict, goal: tuple, solves: bool) -> None:
        """The answers along the path from the search's root to ``goal``: at every state of it when ``solves`` (the
        rest of a shortest path is a shortest path), else at the root alone."""
        chain = [goal]
        while nodes[chain[-1]].parent is not None:
            chain.append(nodes[chain[-1]].parent)
        chain.reverse()  # root ... goal
        n = len(chain)
        if solves or n == 1:
            finish = Action("finish", {"message": f"Done: {task.instruction}." if solves else "Done as far as I can."})
            self._answers.setdefault((task, goal), ExpertStep(finish, _finish_thinking(solves), 1, solves))
        for i in range(n - 1 if solves else min(1, n - 1)):
            child = nodes[chain[i + 1]]
            self._answers.setdefault((task, chain[i]), ExpertStep(child.action, _thinking(child), n - i, solves))


def moves(phone: SimPhone, task: PhoneTask, screen, apps: Sequence[str] = ()) -> Iterator[Action]:
    """The actions the expert tries on the state ``phone`` shows as ``screen`` (see the module's docstring);
    ``apps``: the ones it may launch (default: the task's)."""
    if phone.focus is not None:
        for text in _texts(task):
            yield Action("Type", {"text": text})
    for name, box in screen.elements.items():
        handlers, point = screen.handlers.get(name), centre(box)
        if handlers is None or screen.hit(tuple(point)) != name:  # nothing to do, or covered by another element
            continue
        for kind, does in (
            ("Tap", handlers.tap),
            ("Double Tap", handlers.double_tap),
            ("Long Press", handlers.long_press),
        ):
            if does is not None:
                yield Action(kind, {"element": point})
    page = phone.stack[-1] if phone.app != HOME and phone.stack else None
    if page is not None and page.loading:
        yield Action("Wait", {"duration": f"{math.ceil(page.loading)} seconds"})
    for app in [a for a in apps if a != HOME] or task.apps:
        if installed_app(app, phone.state.contents.apps) is not None:
            yield Action("Launch", {"app": app})
    for start, end in HOME_SWIPES if phone.app == HOME else LIST_SWIPES:
        yield Action("Swipe", {"start": start, "end": end})
    yield Action("Back")
    yield Action("Home")


def _texts(task: PhoneTask) -> list[str]:
    return [task.params[name] for name in ("text", "query") if name in task.params]


def _thinking(node: _Node) -> str:
    """The reasoning of an expert's step: what it does and what that does, in the phone's words."""
    action = node.action
    if action.type in ("Tap", "Double Tap", "Long Press"):
        return f"{action.type} {node.element}: it {node.effect}, a step on the shortest way to the goal."
    if action.type == "Type":
        return f"The field is focused; I type {action.args['text']!r}."
    if action.type == "Launch":
        return f"I launch {action.args['app']}: the task goes on there."
    if action.type == "Swipe":
        return f"What I need is not on this screen; I swipe: it {node.effect}."
    if action.type == "Wait":
        return "The app is still loading and shows nothing to tap yet; I wait for it."
    return f"{action.type}: it {node.effect}, a step on the shortest way to the goal."


def _finish_thinking(solves: bool) -> str:
    if solves:
        return "Every part of the task is done on the screen; the task is done."
    return "What the task asked for is done; something else changed that cannot be undone, so I stop here."
