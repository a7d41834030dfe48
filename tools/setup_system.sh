#!/usr/bin/env bash
# Best effort: install bubblewrap (LocalSandbox isolation) when we are root and it is missing.
# Also docker.io + debootstrap (DockerSandbox; set KNOWLYR_SKIP_DOCKER=1 to skip). The engine itself is started by
# tools/docker_engine.py (called by run_tests.sh) or the pytest fixture `docker_host`, not here.
set -uo pipefail
if ! command -v bwrap >/dev/null 2>&1; then
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap) >/dev/null 2>&1 \
      && echo "installed bubblewrap" || echo "could not install bubblewrap"
  else echo "bubblewrap missing and not root: LocalSandbox refuses to start (fail closed; isolation=none opts out, loudly)"; fi
else echo "bubblewrap: $(command -v bwrap)"; fi
if [[ "${KNOWLYR_SKIP_DOCKER:-0}" != 1 ]] && { ! command -v dockerd >/dev/null 2>&1 || ! command -v debootstrap >/dev/null 2>&1; }; then
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io debootstrap) >/dev/null 2>&1 \
      && echo "installed docker.io and debootstrap" || echo "could not install docker.io/debootstrap: docker tests will be skipped"
  else echo "dockerd or debootstrap missing and not root: docker tests will be skipped"; fi
else echo "dockerd: $(command -v dockerd || echo skipped)"; fi
