#!/usr/bin/env bash
# Best effort: install bubblewrap (LocalSandbox isolation) when we are root and it is missing.
# The docker engine is started by the tests that need it (see tests/conftest.py), not here.
set -uo pipefail
if ! command -v bwrap >/dev/null 2>&1; then
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap) >/dev/null 2>&1 \
      && echo "installed bubblewrap" || echo "could not install bubblewrap"
  else echo "bubblewrap missing and not root: LocalSandbox falls back to unisolated mode"; fi
else echo "bubblewrap: $(command -v bwrap)"; fi
