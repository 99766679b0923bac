#!/usr/bin/env bash
# Regenerates docs/report.png, the README's picture of the HTML run report:
# runs the offline fix-failing-test example, writes its report with
# `capstan report --html` and screenshots it in headless Chromium.
#
#   scripts/report-screenshot.sh [OUT.png]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-docs/report.png}

browser=""
for name in chromium chromium-browser google-chrome; do
  if command -v "$name" >/dev/null 2>&1; then browser=$name; break; fi
done
[ -n "$browser" ] || { echo "needs headless Chromium (apt-get install chromium)" >&2; exit 2; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/capstan" ./cmd/capstan
work=$(examples/fix-failing-test/prepare.sh "$tmp/work")
run_id=$("$tmp/capstan" run examples/fix-failing-test --workdir "$work" --json -q | sed -n 's/^  "runId": "\(.*\)",$/\1/p')
"$tmp/capstan" report "$run_id" --workdir "$work" --html -o "$tmp/report.html"
# The picture should not show this machine's paths: show the checkout as
# ~/src/capstan and the work dir as ~/calc.
sed -i -e "s|$(pwd)|~/src/capstan|g" -e "s|$work|~/calc|g" "$tmp/report.html"
"$browser" --headless --no-sandbox --disable-gpu --disable-background-networking \
  --disable-component-update --disable-sync --no-first-run --hide-scrollbars \
  --user-data-dir="$tmp/profile" --window-size=1100,1250 \
  --screenshot="$out" "file://$tmp/report.html" 2>/dev/null
echo "wrote $out"
