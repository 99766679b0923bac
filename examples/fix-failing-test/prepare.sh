#!/usr/bin/env bash
# Copies the fixture module into a fresh git repository and prints its path:
#   W=$(examples/fix-failing-test/prepare.sh)
set -euo pipefail
src="$(cd "$(dirname "$0")" && pwd)/fixture"
dir="${1:-$(mktemp -d)}"
cp -R "$src"/. "$dir"/
cd "$dir"
git init -q
git config user.name "capstan example"
git config user.email "example@capstan.invalid"
git add -A
git commit -qm "calc: Add is broken"
echo "$dir"
