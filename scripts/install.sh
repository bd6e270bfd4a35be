#!/usr/bin/env bash
# Install gen-launch from this clone, with an optional extra, and leave an environment whose packages import.
# Usage: bash scripts/install.sh [validate|test]
#
# LLaMA-Factory 0.9.5 requires torchvision and torchaudio (it imports them only for image, video and audio data).
# PyPI's wheels of them for torch 2.13 are CUDA builds: beside a CPU torch they fail to import and take
# transformers' imports down with them. They are removed here only where they do not import.
set -euo pipefail
cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.."
case "$#:${1:-}" in
  0:) target=. ;;
  1:validate | 1:test) target=".[$1]" ;;
  *)
    echo "usage: bash scripts/install.sh [validate|test]" >&2
    exit 2
    ;;
esac
python3 -m pip install -e "$target"
for package in torchvision torchaudio; do
  if python3 -m pip show -q "$package" 2>/dev/null && ! python3 -c "import $package" 2>/dev/null; then
    echo "$package is installed but does not import beside this torch: removing it" >&2
    python3 -m pip uninstall -y "$package"
  fi
done
