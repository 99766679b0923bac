#!/usr/bin/env bash
# Runs go test over the module with the given arguments (default: -short
# -count=1 ./...) and prints, for each package, its test binary's wall time
# and CPU time (user + system, with every process it started), then the
# whole run's wall and CPU time, which includes building the test binaries.
# On a shared machine the CPU times are the figures to compare: they move
# little with load, while wall time does.
#
#   scripts/test-times.sh                      # go test -short -count=1 ./...
#   CI=1 scripts/test-times.sh -count=1 ./...  # the full suite
#   scripts/test-times.sh -race -count=1 ./... # as CI runs it
set -euo pipefail

if [ -n "${CAPSTAN_TEST_TIMES_LOG:-}" ]; then
  # Called by go test -exec with the test binary and its arguments, in the
  # package's directory.
  pkg=${PWD#"$CAPSTAN_TEST_TIMES_ROOT"}
  pkg=.${pkg:-/}
  exec /usr/bin/time -a -o "$CAPSTAN_TEST_TIMES_LOG" -f "$pkg %e %U %S" "$@"
fi

command -v /usr/bin/time >/dev/null || { echo "test-times: needs /usr/bin/time (Debian package time)" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
[ $# -gt 0 ] || set -- -short -count=1 ./...
log=$(mktemp)
trap 'rm -f "$log" "$log.total"' EXIT
echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
status=0
CAPSTAN_TEST_TIMES_LOG=$log CAPSTAN_TEST_TIMES_ROOT=$root \
  /usr/bin/time -o "$log.total" -f "%e %U %S" go test -exec "$root/scripts/test-times.sh" "$@" || status=$?
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
printf '%-36s %8s %8s %8s %8s\n' package wall user system cpu
# time(1) adds a line of its own for a binary that exits non-zero.
awk '$1 ~ /^\./ && NF == 4 { printf "%-36s %7.1fs %7.1fs %7.1fs %7.1fs\n", $1, $2, $3, $4, $3 + $4 }' "$log" | sort -k5,5 -rn
awk '$1 ~ /^\./ && NF == 4 { u += $3; s += $4 } END { printf "%-36s %8s %7.1fs %7.1fs %7.1fs\n", "(all test binaries)", "", u, s, u + s }' "$log"
# The last line: time(1) writes one before it when go test fails.
read -r wall user sys < <(tail -n1 "$log.total")
awk -v w="$wall" -v u="$user" -v s="$sys" 'BEGIN { printf "%-36s %7.1fs %7.1fs %7.1fs %7.1fs\n", "(go test, with the builds)", w, u, s, u + s }'
exit "$status"
