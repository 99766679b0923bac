#!/usr/bin/env bash
# Copies the fixture module into a fresh git repository and prints its path:
#   W=$(examples/hidden-tests/prepare.sh)
# The hidden tests (_hidden/) stay in the agent folder: capstan places them
# in the work dir only while it runs them.
set -euo pipefail
src="$(cd "$(dirname "$0")" && pwd)/fixture"
dir="${1:-$(mktemp -d)}"
cp -R "$src"/. "$dir"/
cd "$dir"
git init -q
git config user.name "capstan example"
git config user.email "example@capstan.invalid"
git add -A
git commit -qm "mathx: Abs is broken"
echo "$dir"
