#!/bin/bash
# The committed C declarations of the aclnn fact table (codegen/ascend/acl_facts.inc,
# ascend_emu/acl_all.h) are what tools/gen_acl_facts makes of ../shared/aclnn-api.json
# today, and acl_all.h compiles as C99 (-pedantic -Werror) under gcc and clang.
# usage: tests/e2e/ascend_facts.sh BUILD_DIR
set -u
BUILD=${1:-build}
cd "$(dirname "$0")/../.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }
if "$BUILD/gen_acl_facts" ../shared/aclnn-api.json "$work/acl_facts.inc" "$work/acl_all.h"; then
  for f in codegen/ascend/acl_facts.inc ascend_emu/acl_all.h; do
    cmp -s "$f" "$work/$(basename "$f")" && ok "$f is up to date" ||
      bad "$f differs from the fact table's declarations (rerun $BUILD/gen_acl_facts ../shared/aclnn-api.json codegen/ascend/acl_facts.inc ascend_emu/acl_all.h)"
  done
  n=$(grep -c '^ACL_DECL(FN,' "$work/acl_facts.inc")
  want=$(/usr/bin/python3 -c "import json; print(len(json.load(open('../shared/aclnn-api.json'))['functions']))")
  [ "$n" = "$want" ] && ok "$n functions declared, as many as the fact table lists" || bad "$n functions declared, the table lists $want"
else bad "gen_acl_facts failed"; fi
printf '#include "acl_all.h"\nint main(void) { return 0; }\n' > "$work/t.c"
for cc in gcc clang; do
  $cc -std=c99 -pedantic -Wall -Wextra -Werror -Iascend_emu "$work/t.c" -o "$work/t" 2> "$work/cc.log" &&
    ok "acl_all.h compiles with $cc -std=c99 -pedantic -Werror" || bad "acl_all.h under $cc: $(head -3 "$work/cc.log")"
done
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
