#!/bin/sh
# build.sh OUTPUT: builds the capstan side of BenchmarkIteration against
# the capstan of 2026-11-21 (commit b015ec2) in a temporary checkout and
# writes the test binary to OUTPUT, to be run next to the eino module's
# binary (docs/benchmarks.md, "capstan next to eino").
set -eu
out=$(realpath -m "$1")
here=$(cd "$(dirname "$0")" && pwd)
repo=$(git -C "$here" rev-parse --show-toplevel)
tmp=$(mktemp -d)
trap 'git -C "$repo" worktree remove --force "$tmp/capstan" >/dev/null 2>&1; rm -rf "$tmp"' EXIT
git -C "$repo" worktree add --detach "$tmp/capstan" b015ec2 >/dev/null 2>&1
dir="$tmp/capstan/internal/bench/then"
mkdir -p "$dir"
cp "$here/then_test.go" "$dir/"
cp "$here/go.mod.in" "$dir/go.mod"
cp "$here/go.sum.in" "$dir/go.sum"
cd "$dir"
go test -tags capstan20261121 -c -o "$out" .
