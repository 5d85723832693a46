"""The one reader of /proc/PID/stat: a zombie is told from a live process, a process group's live members listed."""

import os
import subprocess
import sys
import time

from workbench.runs import procfs


def test_fields_split_after_the_last_parenthesis_of_the_command_name(tmp_path):
    stat = tmp_path / "stat"
    stat.write_text("4242 (a) b (Z c) S 1 777 777 0 -1\n")  # a command name holding ") " and "(Z"
    assert procfs._fields(stat)[:3] == ["S", "1", "777"]
    assert procfs._fields(tmp_path / "gone") is None


def test_an_unreaped_child_is_a_zombie_and_a_live_one_is_not():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        deadline = time.monotonic() + 30
        while not procfs.is_zombie(child.pid) and time.monotonic() < deadline:
            time.sleep(0.05)  # it exits, and stays a zombie until we reap it
        assert procfs.is_zombie(child.pid)
    finally:
        child.wait()
    assert not procfs.is_zombie(os.getpid())


def test_group_members_lists_the_live_processes_of_a_group_only():
    leader = subprocess.Popen(["sh", "-c", "sleep 60 & exec sleep 60"], start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while len(procfs.group_members(leader.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        members = procfs.group_members(leader.pid)
        assert leader.pid in members and len(members) == 2, members  # the leader and its background sleep
        assert os.getpid() not in members
    finally:
        os.killpg(leader.pid, 9)
        leader.wait()
    deadline = time.monotonic() + 30
    while procfs.group_members(leader.pid) and time.monotonic() < deadline:
        time.sleep(0.05)  # the orphaned sleep is reaped by init
    assert procfs.group_members(leader.pid) == []
