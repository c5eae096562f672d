"""The system user that runs the servers when blocklab runs as root: made once, even when two
blocklab processes (two runs, the suite's two workers) find it missing at the same moment."""

from __future__ import annotations

import subprocess

import pytest

from blocklab.engines import service_user
from blocklab.engines.base import EngineError


class FakeMachine:
    """/etc/passwd as a set, and a useradd that answers as the real one does: exit 9 when the
    user exists, exit 10 when /etc/passwd is locked by another useradd."""

    def __init__(self, lock_first: int = 0, created_by_other: bool = False):
        self.users: set[str] = set()
        self.lock_first = lock_first
        self.created_by_other = created_by_other
        self.calls = 0

    def getpwnam(self, name: str) -> object:
        if name not in self.users:
            raise KeyError(name)
        return object()

    def run(self, argv: list[str], **_: object) -> subprocess.CompletedProcess[str]:
        self.calls += 1
        name = argv[-1]
        if self.created_by_other:  # the other process's useradd won the race
            self.users.add(name)
            self.created_by_other = False
            return subprocess.CompletedProcess(argv, 9, "", f"useradd: user '{name}' already exists\n")
        if self.lock_first > 0:
            self.lock_first -= 1
            return subprocess.CompletedProcess(argv, 10, "", "useradd: cannot lock /etc/passwd; try again later.\n")
        self.users.add(name)
        return subprocess.CompletedProcess(argv, 0, "", "")


@pytest.fixture
def machine(monkeypatch: pytest.MonkeyPatch):
    def install(**kw: object) -> FakeMachine:
        fake = FakeMachine(**kw)  # type: ignore[arg-type]
        monkeypatch.setattr(service_user.pwd, "getpwnam", fake.getpwnam)
        monkeypatch.setattr(service_user.subprocess, "run", fake.run)
        monkeypatch.setattr(service_user.time, "sleep", lambda s: None)
        return fake

    return install


def test_a_user_made_by_another_process_meanwhile_is_not_an_error(machine):
    fake = machine(created_by_other=True)
    service_user.ensure_service_user("bl-test")
    assert fake.users == {"bl-test"} and fake.calls == 1


def test_a_locked_passwd_file_is_tried_again(machine):
    fake = machine(lock_first=2)
    service_user.ensure_service_user("bl-test")
    assert fake.users == {"bl-test"} and fake.calls == 3


def test_a_user_that_cannot_be_made_is_an_error_naming_it_and_why(machine):
    machine(lock_first=99)
    with pytest.raises(EngineError, match=r"could not create the system user 'bl-test'.*exited 10: useradd: cannot lock /etc/passwd"):
        service_user.ensure_service_user("bl-test", attempts=3)


def test_an_existing_user_is_left_alone(machine):
    fake = machine()
    fake.users.add("bl-test")
    service_user.ensure_service_user("bl-test")
    assert fake.calls == 0
