#!/bin/bash
# Renders an HTML page in headless Chromium with the network closed, takes a
# screenshot, and checks the DOM Chromium built: the coverage table and the
# per-target rate bars are there, and clicking a header sorts the table.
# usage: tests/e2e/html_screenshot.sh PAGE.html OUT.png
set -u
page=$(realpath "$1") png=$2
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
flags=(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking
       --disable-component-update --disable-sync --user-data-dir="$profile" --proxy-server=127.0.0.1:9
       --window-size=1280,900)
timeout 60 chromium "${flags[@]}" --screenshot="$png" "file://$page" >/dev/null 2>&1
[ -s "$png" ] || { echo "no screenshot"; exit 1; }
size=$(stat -c %s "$png")
[ "$size" -gt 10000 ] || { echo "screenshot too small ($size bytes): blank page?"; exit 1; }
dom=$(timeout 60 chromium "${flags[@]}" --dump-dom "file://$page" 2>/dev/null)
echo "$dom" | grep -q '<table class="sortable">' || { echo "no table in the rendered DOM"; exit 1; }
echo "$dom" | grep -q 'class="fill"' || { echo "no rate bars"; exit 1; }
# sorting: a copy of the page that clicks the "count" header twice (descending) and
# records the first row's count, which must be the largest count in the table
sed 's#</body></html>#<script>var th=document.querySelectorAll("table.sortable th")[1];th.click();th.click();\
document.body.setAttribute("data-first",document.querySelector("table.sortable tbody tr").cells[1].textContent);</script></body></html>#' \
  "$page" > "$profile/sorted.html"
first=$(timeout 60 chromium "${flags[@]}" --dump-dom "file://$profile/sorted.html" 2>/dev/null | grep -o 'data-first="[0-9]*"' | grep -o '[0-9]*')
max=$(echo "$dom" | sed -n '0,/<\/table>/p' | grep -o '<tr><td>[^<]*</td><td>[0-9]*</td>' | head -200 | sed 's/.*<td>\([0-9]*\)<\/td>$/\1/' | sort -n | tail -1)
[ -n "$first" ] && [ "$first" = "$max" ] || { echo "sorting by count failed (first $first, max $max)"; exit 1; }
echo "screenshot $size bytes, table and bars rendered, sorting works (first count $first)"
