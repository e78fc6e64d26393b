# Sourced by the suites that run independent parts side by side (the machine's
# cores are otherwise idle while one Python or qemu process works).
# par_wait_slot: returns once fewer background jobs run than there are cores.
par_wait_slot() { while [ "$(jobs -rp | wc -l)" -ge "$(nproc)" ]; do wait -n; done; }
# par_collect LOG...: after `wait`, prints each LOG without its last line
# "COUNTS PASS FAIL" and adds those to the caller's pass and fail; a LOG without
# one (its part died) is a failure.
par_collect() {
  local l c
  for l; do
    grep -v '^COUNTS ' "$l"
    c=$(grep '^COUNTS ' "$l") || { echo "FAIL $(basename "$l"): its checks did not finish"; fail=$((fail + 1)); continue; }
    set -- $c
    pass=$((pass + $2)) fail=$((fail + $3))
  done
}
