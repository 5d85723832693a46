"""Phone-agent episodes (layer 10, beside eval): the loop that runs tasks on a phone with a policy, in AutoGLM's
runtime format (``run_episodes``), the policies (a served model, the oracle, the expert; an in-process model plugs in as any
callable of the same shape), episode metrics, the episodes on disk, the one judge of episodes (``judge``: every
caller that compares agents on whole episodes), ``evaluate_agent`` behind ``workbench agent run`` and the recorder
of training rows behind ``workbench agent record``."""

from .episode import Episode, Turn
from .evaluate import AgentError, AgentReport, evaluate_agent
from .judging import Contestant, Judged, judge, play_to_folder
from .metrics import paired, summarize_episodes
from .policy import ExpertPolicy, InProcessPolicy, OraclePolicy, Policy, ServedPolicy
from .runner import run_episodes, sim_devices

__all__ = [
    "AgentError",
    "AgentReport",
    "Contestant",
    "Episode",
    "ExpertPolicy",
    "InProcessPolicy",
    "Judged",
    "OraclePolicy",
    "Policy",
    "ServedPolicy",
    "Turn",
    "evaluate_agent",
    "judge",
    "paired",
    "play_to_folder",
    "run_episodes",
    "sim_devices",
    "summarize_episodes",
]
