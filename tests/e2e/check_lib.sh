# Sourced by the e2e suites: check DESCRIPTION COMMAND... runs COMMAND (its output
# to $work/last.log; $work must exist), counts it in pass or fail, prints "ok" or
# "FAIL" and, on failure, the first lines of that output.
pass=0 fail=0
check() {
  local what=$1; shift
  if "$@" > "$work/last.log" 2>&1; then pass=$((pass + 1)); echo "ok   $what"
  else fail=$((fail + 1)); echo "FAIL $what"; sed 's/^/     /' "$work/last.log" | head -8; fi
}
