"""A Jupyter-first research workbench for training LLM agents with reinforcement learning

Modules:

- `knowlyr_lab.mcp`: The sandbox, recorder, reward and hub tools over the Model Context Protocol (stdio, or streamable HTTP on 127.0.0.1 with a bearer token), every path confined to one root, typed and described inputs and outputs.
- `knowlyr_lab.sandbox.base`: What every sandbox backend shares: tool results, resource limits, bounded output, paths that stay inside the workspace, and snapshots.
- `knowlyr_lab.sandbox.core`: One protocol for running an agent's tool calls in an isolated workspace: a local bubblewrap backend by default, Docker when you ask for it, the same seven tools, limits, snapshots and restore everywhere.
- `knowlyr_lab.sandbox.docker`: The same `Sandbox` protocol in a container: no network, read-only root, a tmpfs workspace, memory/CPU/pids limits, no capabilities, commands killed on timeout, snapshots through tar.
- `knowlyr_lab.sandbox.host`: What the host does so that one sandbox cannot reach the host or starve another: file access that cannot be raced, a uid of its own, a cgroup, and size-limited filesystems.
- `knowlyr_lab.sandbox.local`: The default sandbox backend: a workspace directory on this machine, every command under bubblewrap with no network, a read-only system, an unprivileged uid, an empty environment and enforced limits.
- `knowlyr_lab.verifiers`: Hidden tests that decide a reward, run where the agent's work cannot forge them: a pristine copy of the task with only the agent's files applied, in a fresh sandbox, reporting through a channel the agent's code does not write."""

__version__ = "0.0.1"
