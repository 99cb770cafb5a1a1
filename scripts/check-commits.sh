#!/usr/bin/env bash
# Every commit since the rule began has a subject of at most 72 characters and a body saying why.
# Older history is left as it was written. A shallow clone without that commit checks all it has:
# main is linear, so every commit it holds came after it.
set -euo pipefail
cd "$(dirname "$0")/.."
SINCE=f8616960c6ef091ca14b883ffd8596682ff3f04c
range=HEAD
if git cat-file -e "$SINCE^{commit}" 2>/dev/null; then range="$SINCE..HEAD"; fi
failed=0
while IFS= read -r commit; do
  subject=$(git log -1 --format=%s "$commit")
  body=$(git log -1 --format=%b "$commit" | grep -v '^\s*$' | grep -v -i '^co-authored-by:' || true)
  if [ "${#subject}" -gt 72 ]; then
    echo "commit ${commit:0:10}: subject of ${#subject} characters (at most 72): $subject"
    failed=1
  fi
  if [ -z "$body" ]; then
    echo "commit ${commit:0:10}: no body saying why: $subject"
    failed=1
  fi
done < <(git rev-list --no-merges "$range")
exit "$failed"
