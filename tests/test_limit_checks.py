"""Every limit a class is given is checked by one of two functions (`positive_int`, `positive_number`, on the errors
page): a count is a positive integer, a time, a core share or a size in MiB a finite number above 0, and the error
names `Class.field`. Until srv18 `SandboxLimits`, `CopyLimits` and `ArgLimits` each kept their own `v <= 0` check,
which NaN passes (`nan <= 0` is False), as it passes infinity and a fractional count (`max_processes=2.5`)."""
import math

import pytest

from knowlyr_lab import errors
from knowlyr_lab.envs.sessions import SessionLimits
from knowlyr_lab.mcp import ArgLimits
from knowlyr_lab.mcp_copy import CopyLimits
from knowlyr_lab.sandbox.base import SandboxLimits

NUMBER, COUNT = 'must be a finite number above 0, got', 'must be a positive integer, got'

@pytest.mark.parametrize('cls,field,value,says', [
    (SandboxLimits, 'wall_timeout', math.nan, NUMBER), (SandboxLimits, 'max_wall_timeout', math.inf, NUMBER),
    (SandboxLimits, 'cpus', math.nan, NUMBER), (SandboxLimits, 'disk_mb', math.inf, NUMBER),
    (SandboxLimits, 'max_processes', 2.5, COUNT), (SandboxLimits, 'memory_mb', math.nan, COUNT),
    (SandboxLimits, 'tmp_mb', 0.5, COUNT), (SandboxLimits, 'cpu_seconds', 0.5, COUNT),
    (SandboxLimits, 'max_output_chars', math.inf, COUNT),
    (CopyLimits, 'max_mb', math.nan, NUMBER), (CopyLimits, 'max_total_mb', math.inf, NUMBER),
    (CopyLimits, 'max_files', 2.5, COUNT), (CopyLimits, 'max_files', math.inf, COUNT),
    (ArgLimits, 'max_mb', math.inf, NUMBER), (ArgLimits, 'max_mb', math.nan, NUMBER),
    (ArgLimits, 'max_depth', 2.5, COUNT), (ArgLimits, 'max_depth', math.nan, COUNT),
    (SessionLimits, 'idle_timeout', math.inf, NUMBER), (SessionLimits, 'idle_timeout', math.nan, NUMBER),
])
def test_nan_inf_and_fractional_counts_are_refused_naming_the_field(cls, field, value, says):
    "main: every one of these was taken (SessionLimits refused NaN but took inf)"
    with pytest.raises(ValueError, match=rf'^{cls.__name__}\.{field}( \(None: never\))? {says} {value!r}$'):
        cls(**{field: value})

def test_what_is_fractional_by_nature_stays_fractional():
    "Seconds, cores and the workspace's MiB (`disk_mb`, whose copy bound is fractional: test_sandbox_host_failures)"
    got = SandboxLimits(wall_timeout=0.5, cpus=0.5, disk_mb=1.5)
    assert (got.wall_timeout, got.cpus, got.disk_mb) == (0.5, 0.5, 1.5)
    assert (CopyLimits(max_mb=0.5).max_total_mb, ArgLimits(max_mb=0.25).max_mb) == (2.0, 0.25)
    assert SessionLimits(idle_timeout=None).idle_timeout is None

def test_one_definition_of_each_check():
    "The sessions, connections, sandbox and MCP modules use the errors page's functions, not copies of them"
    from knowlyr_lab import mcp, mcp_copy
    from knowlyr_lab.envs import serve, sessions
    from knowlyr_lab.sandbox import base
    from knowlyr_lab.serving import connections
    for m in (sessions, serve, connections, base, mcp, mcp_copy):
        for name in ('positive_int', 'positive_number'):
            if hasattr(m, name): assert getattr(m, name) is getattr(errors, name), (m.__name__, name)
    assert 'positive_int' not in sessions.__all__ and 'positive_int' in errors.__all__

@pytest.mark.parametrize('cls,field', [(SandboxLimits, 'wall_timeout'), (SandboxLimits, 'cpus'),
                                       (SessionLimits, 'idle_timeout'), (CopyLimits, 'max_mb'), (ArgLimits, 'max_mb')])
def test_an_integer_past_float_range_is_refused_naming_the_field(cls, field):
    "main: 10**400 compared below inf and was taken; `time.monotonic() + t` or the reaper's `t / 4` then overflowed"
    with pytest.raises(ValueError, match=rf'^{cls.__name__}\.{field}( \(None: never\))? {NUMBER} an integer past float '
                                         r'range \(1329 bits\)$'):
        cls(**{field: 10**400})

def test_the_refusal_of_a_huge_integer_is_one_short_line():
    "A 5000-digit integer's repr would raise on its own (Python's 4300-digit cap); the error gives its size instead"
    for big in (-10**5000, 10**5000):
        with pytest.raises(ValueError, match=rf'^idle_timeout {NUMBER} an integer past float range \(16610 bits\)$'):
            errors.positive_number(big, 'idle_timeout')
    assert errors.positive_number(10**308, 'x') == 10**308 and errors.positive_number(1e308, 'x') == 1e308

def test_the_cgroup_budget_holds_the_rounded_quotas():
    "budget_mb was int(memory_mb + disk_mb + 2 * tmp_mb): 0.3 MiB of workspace rounded up to pages, and the budget down"
    assert SandboxLimits(disk_mb=0.3).budget_mb == 1024 + 1 + 2 * 64
    assert SandboxLimits(disk_mb=1.9).budget_mb == 1024 + 2 + 2 * 64
    assert SandboxLimits(disk_mb=1e308).disk_bytes == 2**62          # int(inf) raised OverflowError in every cap

def test_a_timeout_past_what_a_thread_can_wait_still_runs_the_command():
    "wall_timeout >= threading.TIMEOUT_MAX (1e10 s) passed the check, and the local sandbox's timer thread died with OverflowError"
    import threading

    from knowlyr_lab.sandbox.local import LocalSandbox
    died = []
    old, threading.excepthook = threading.excepthook, lambda a: died.append(a.exc_value)
    try:
        with LocalSandbox(limits={'wall_timeout': 1e10, 'max_wall_timeout': 1e10}, isolation='none') as sb:
            assert sb.execute_tool('shell', {'command': 'echo hi'}).output.strip() == 'hi'
    finally: threading.excepthook = old
    assert died == []

def test_sandbox_limits_cannot_be_changed_past_their_check():
    "A checked SandboxLimits could be given `disk_mb = inf` afterwards, and every cap then read a value never checked"
    import dataclasses
    lim = SandboxLimits()
    with pytest.raises(dataclasses.FrozenInstanceError): lim.disk_mb = float('inf')
    assert lim.disk_mb == 512
    with pytest.raises(ValueError, match='SandboxLimits.max_processes'): dataclasses.replace(lim, max_processes=0)
