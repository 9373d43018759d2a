#!/usr/bin/env bash
# The nightly's run history: runs/*.jsonl on the branch $HISTORY_BRANCH (default
# nightly-history), kept off main so the nightly never commits to the code branch.
#   ci/history.sh open DIR   DIR becomes a worktree of the branch's tip (an empty orphan
#                            branch on the first night); DIR/runs exists afterwards
#   ci/history.sh push DIR   commit DIR/runs and push it to the branch (nothing new: no commit)
# Runs inside a checkout whose `origin` may be pushed to (actions/checkout's credentials).
set -euo pipefail
branch=${HISTORY_BRANCH:-nightly-history}
dir=${2:?usage: ci/history.sh open|push DIR}
case "${1:-}" in
  open)
    if git fetch -q --depth=1 origin "$branch" 2>/dev/null; then
      git worktree add -q --detach "$dir" FETCH_HEAD
    else
      echo "ci/history.sh: no branch $branch yet: starting it empty"
      git worktree add -q --detach "$dir" HEAD
      git -C "$dir" checkout -q --orphan "$branch"
      git -C "$dir" rm -rfq .
    fi
    mkdir -p "$dir/runs"
    ;;
  push)
    git -C "$dir" add runs
    if git -C "$dir" diff --cached --quiet; then echo "ci/history.sh: nothing new"; exit 0; fi
    git -C "$dir" -c user.name="aoq nightly" -c user.email="aoq-nightly@users.noreply.github.com" \
      commit -q -m "nightly: $(git -C "$dir" diff --cached --name-only | wc -l) run file(s)"
    git -C "$dir" push -q origin "HEAD:refs/heads/$branch"
    ;;
  *) echo "usage: ci/history.sh open|push DIR" >&2; exit 2 ;;
esac
