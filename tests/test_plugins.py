"One registry policy for envs, log formats, sandbox backends, reward rules and domains (issue 14)"
import subprocess
import sys
import textwrap

import pytest

from knowlyr_lab.plugins import Registry, RegistryWarning, UnknownNameError


def _registries():
    from knowlyr_lab.domains import DOMAINS, DomainProfile
    from knowlyr_lab.recorder.base import _ADAPTERS, LogAdapter
    from knowlyr_lab.registry import ENVS, EnvSpec
    from knowlyr_lab.reward.rules import RULES, Rule, RuleResult
    from knowlyr_lab.sandbox.protocol import SANDBOX_BACKENDS
    class QA(LogAdapter): name = 'qa-test'
    def rule(v, ix, ctx): return RuleResult(1.0, 'ok')
    def other(v, ix, ctx): return RuleResult(0.0, 'no')
    # (registry, name, a thing, the same thing made again, something different, a near-miss name)
    return [(ENVS, 'test/reg', EnvSpec('test/reg', 'knowlyr_lab.core:TimeStep'), EnvSpec('test/reg', 'knowlyr_lab.core:TimeStep'),
             EnvSpec('test/reg', 'knowlyr_lab.core:AgentEnv'), 'test/rge'),
            (_ADAPTERS, 'qa-test', QA(), QA(),
             type('Other', (LogAdapter,), {'name': 'qa-test'})(), 'qa-tset'),
            (SANDBOX_BACKENDS, 'test-backend', 'knowlyr_lab.sandbox.local:LocalSandbox', 'knowlyr_lab.sandbox.local:LocalSandbox',
             'knowlyr_lab.sandbox.docker:DockerSandbox', 'test-backnd'),
            (RULES, 'test_rule', Rule('test_rule', rule, 1.0), Rule('test_rule', rule, 1.0), Rule('test_rule', other, 1.0), 'test_rul'),
            (DOMAINS, 'test-domain', DomainProfile(domain='test-domain'), DomainProfile(domain='test-domain'),
             DomainProfile(domain='test-domain', display_name='other'), 'test-domian')]


@pytest.mark.parametrize('i', range(5), ids=['envs', 'log formats', 'sandbox backends', 'rules', 'domains'])
def test_every_registry_has_the_same_policy(i):
    reg, name, thing, again, different, typo = _registries()[i]
    assert isinstance(reg, Registry)
    reg.register(name, thing)
    try:
        reg.register(name, again)                                        # a re-import / notebook re-run: accepted
        with pytest.raises(ValueError, match='already registered'): reg.register(name, different)
        assert name in reg and name in reg.names()
        with pytest.raises(UnknownNameError, match=f"did you mean {name!r}") as e: reg[typo]
        assert isinstance(e.value, KeyError)
        reg.register(name, different, overwrite=True)
    finally: reg.unregister(name)
    assert name not in reg


def test_register_apis_follow_the_policy():
    "The public register functions of each kind go through the registry"
    from knowlyr_lab.domains import DomainProfile, UnknownDomainError, get_domain, register_domain
    from knowlyr_lab.registry import env_spec, register
    from knowlyr_lab.reward.rules import RuleResult, register_rule, unregister_rule
    from knowlyr_lab.sandbox.protocol import SANDBOX_BACKENDS, UnknownBackendError, create_sandbox, register_sandbox_backend
    src = "def r(v, ix, ctx): return RuleResult(1.0, 'ok')\n"
    ns1, ns2 = {'RuleResult': RuleResult}, {'RuleResult': RuleResult}
    exec(src, ns1); exec(src, ns2)                                       # the same notebook cell, run twice
    register_rule('twice', ns1['r']); register_rule('twice', ns2['r'])   # used to raise 'already registered'
    unregister_rule('twice')
    register_domain(DomainProfile(domain='twice')); register_domain(DomainProfile(domain='twice'))
    assert get_domain('twice').domain == 'twice'
    with pytest.raises(UnknownDomainError, match="did you mean 'twice'"): get_domain('twcie')
    register_sandbox_backend('twice', 'knowlyr_lab.sandbox.local:LocalSandbox')
    with pytest.raises(ValueError, match='already registered'): register_sandbox_backend('twice', 'knowlyr_lab.sandbox.docker:DockerSandbox')
    SANDBOX_BACKENDS.unregister('twice')
    with pytest.raises(UnknownBackendError, match="did you mean 'docker'"): create_sandbox('dokcer')
    from knowlyr_lab.registry import ENVS
    register('test/twice', 'knowlyr_lab.core:TimeStep', overwrite=True)
    try: assert env_spec('test/twice').id == 'test/twice'
    finally: ENVS.unregister('test/twice')


def test_a_broken_env_module_warns_and_the_other_envs_stay(tmp_path):
    "A failing import in one env module used to empty the whole env registry silently"
    (tmp_path / 'aaa_broken_env.py').write_text("raise ImportError('needs libfoo')\n")
    code = textwrap.dedent(f"""
        import warnings, knowlyr_lab.envs as pkg
        pkg.__path__.insert(0, {str(tmp_path)!r})          # a broken plugin module, found first
        from knowlyr_lab.registry import list_envs
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter('always')
            envs = list_envs()
        msgs = [str(x.message) for x in w]
        assert 'knowlyr/maze-easy' in envs and 'knowlyr/arith-easy' in envs, envs
        assert any('aaa_broken_env' in m and 'libfoo' in m for m in msgs), msgs
        print('ok', len(envs))
    """)
    r = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.startswith('ok'), r.stderr[-2000:]


def test_discovery_goes_on_after_a_broken_entry_point(monkeypatch):
    "Entry points of every kind: a broken one warns, the others load"
    import knowlyr_lab.plugins as R
    loaded = []
    class EP:
        def __init__(self, name, ok): self.name, self.value, self.ok = name, f'pkg:{name}', ok
        def load(self):
            if not self.ok: raise ImportError('broken plugin')
            loaded.append(self.name)
    monkeypatch.setattr(R, 'entry_points', lambda group: [EP('bad', False), EP('good', True)])
    reg = Registry('widget', group='test.widgets')
    with pytest.warns(RegistryWarning, match="entry point 'bad'"): reg.names()
    assert loaded == ['good']


def test_different_definitions_with_one_name_are_not_taken_for_a_rerun():
    "Closures, constants, defaults and partials that differ are different registrations (never replaced silently)"
    import functools

    from knowlyr_lab.envs.maze import MazeEnv
    from knowlyr_lab.registry import ENVS, register
    def at(size): return lambda: MazeEnv(size=size)
    register('test/closure', at(5))
    try:
        with pytest.raises(ValueError, match='already registered'): register('test/closure', at(9))
    finally: ENVS.unregister('test/closure')
    register('test/partial', functools.partial(MazeEnv, size=5))
    try:
        register('test/partial', functools.partial(MazeEnv, size=5))                 # the same again: fine
        with pytest.raises(ValueError, match='already registered'): register('test/partial', functools.partial(MazeEnv, size=9))
    finally: ENVS.unregister('test/partial')


def test_an_override_before_discovery_survives_it():
    "Replacing a bundled env before the first lookup used to make its module fail to import (and hide its siblings)"
    code = textwrap.dedent("""
        import warnings
        from knowlyr_lab.registry import register, list_envs, env_spec
        class MyMaze: pass
        register('knowlyr/maze-easy', MyMaze, overwrite=True)
        with warnings.catch_warnings():
            warnings.simplefilter('error')
            envs = list_envs()
        assert env_spec('knowlyr/maze-easy').entry_point is MyMaze and 'knowlyr/maze-hard' in envs
        from knowlyr_lab.envs.maze import MazeEnv
        print('ok')
    """)
    r = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.startswith('ok'), r.stderr[-2000:]
