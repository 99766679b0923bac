#!/usr/bin/env bash
# Cross-builds static capstan binaries for linux and darwin on amd64 and
# arm64, stamps them with the version, commit and build date, and writes
# SHA-256 checksums next to them.
#
#   scripts/release.sh [VERSION] [OUT_DIR]
#
# VERSION defaults to `git describe --tags --always --dirty` (a tag such as
# v0.1.0 on a release commit); OUT_DIR defaults to dist/. The result:
#
#   dist/capstan_<version>_<os>_<arch>.tar.gz   binary, LICENSE, NOTICE, README.md
#   dist/SHA256SUMS                             checksums of the archives
set -euo pipefail
cd "$(dirname "$0")/.."

version=${1:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
out=${2:-dist}
commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)
# The commit's own time, so that rebuilding a commit gives the same stamp.
build_date=$(TZ=UTC git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ 2>/dev/null || TZ=UTC date +%Y-%m-%dT%H:%M:%SZ)

ldflags="-s -w -X main.version=$version -X main.commit=$commit -X main.buildDate=$build_date"
mkdir -p "$out"
out=$(cd "$out" && pwd)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT

archives=()
for os in linux darwin; do
  for arch in amd64 arm64; do
    name="capstan_${version}_${os}_${arch}"
    mkdir -p "$stage/$name"
    echo "building $name"
    CGO_ENABLED=0 GOOS=$os GOARCH=$arch go build -trimpath -buildvcs=false \
      -ldflags "$ldflags" -o "$stage/$name/capstan" ./cmd/capstan
    cp LICENSE NOTICE README.md "$stage/$name/"
    # Fixed owner and mtime keep the archive's bytes a function of its inputs.
    tar -C "$stage" --owner=0 --group=0 --numeric-owner --mtime="$build_date" \
      -czf "$out/$name.tar.gz" "$name"
    archives+=("$name.tar.gz")
  done
done

(cd "$out" && sha256sum "${archives[@]}" > SHA256SUMS)
echo "wrote ${#archives[@]} archives and SHA256SUMS to $out"
