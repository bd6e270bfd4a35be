#!/usr/bin/env bash
# Install gen-launch from this clone, with an optional extra, and leave an environment whose packages import.
# Usage: bash scripts/install.sh [validate|test|verl|charts]
#
# charts: what tests/test_charts.py draws PLAN.md's Mermaid charts with, as GitHub would: Debian's chromium (apt-get,
# as root, where no chromium is on PATH) and mermaid as package.json / package-lock.json pin it, into node_modules/ in
# this clone (npm ci).
#
# verl: only builds .venv-verl/ in this clone, the interpreter in which verl 0.7.0's own config code checks Hydra
# overrides (generator/frameworks/verl/checks.py), from the pinned list scripts/verl-requirements.txt; verl's
# requirements (vllm, ray[default], wandb, ...) are not followed. No pip cache is written outside the clone.
#
# test also installs what bench/mutants.py selects each mutant's tests with: coverage.py's per-test contexts, through
# pytest-cov's --cov-context=test (bench only: the package and its tests do not import them).
#
# LLaMA-Factory 0.9.5 requires torchvision and torchaudio (it imports them only for image, video and audio data).
# PyPI's wheels of them for torch 2.13 are CUDA builds: beside a CPU torch they fail to import and take
# transformers' imports down with them. They are removed here only where they do not import.
set -euo pipefail
cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.."
case "$#:${1:-}" in
  1:verl)
    rm -rf .venv-verl
    python3 -m venv .venv-verl
    .venv-verl/bin/python -m pip install --no-cache-dir --no-deps -r scripts/verl-requirements.txt
    .venv-verl/bin/python -c "import hydra, pyarrow, verl.utils.config, verl.utils.dataset.rl_dataset, verl.workers.config, verl.trainer.ppo.utils"
    exit 0
    ;;
  1:charts)
    if ! command -v chromium >/dev/null 2>&1; then
      apt-get update
      apt-get install -y --no-install-recommends chromium
    fi
    npm ci --no-audit --no-fund
    exit 0
    ;;
  0:) target=. ;;
  1:validate | 1:test) target=".[$1]" ;;
  *)
    echo "usage: bash scripts/install.sh [validate|test|verl|charts]" >&2
    exit 2
    ;;
esac
# A copy, not a link to this clone (-e): a later `gen-launch` on this Python still runs when the clone is deleted.
python3 -m pip install "$target"
if [ "$target" = ".[test]" ]; then
  python3 -m pip install "coverage==7.17.5" "pytest-cov==7.1.0"
fi
for package in torchvision torchaudio; do
  if python3 -m pip show -q "$package" 2>/dev/null && ! python3 -c "import $package" 2>/dev/null; then
    echo "$package is installed but does not import beside this torch: removing it" >&2
    python3 -m pip uninstall -y "$package"
  fi
done
