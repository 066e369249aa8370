#!/usr/bin/env bash
# A newcomer's first `make report`, timed: clone, set up .venv, run the pages, build the book.
#
#   benchmarks/fresh_clone.sh [REF] [setup|report]     (default: HEAD report)
#
# Clones this repository at REF into a new folder, then times with /usr/bin/time -v
#   setup   `make .venv/.installed` (INSTALLER=uv or pip, as set in the environment; uv by default),
#   report  then `make report` with an empty FAIRNB_CACHE (both GGUF conversions and every model call
#           included), the pages and the book timed apart (`fairnb run`, then `fairnb book`).
# MODELS and CHAPTERS narrow the pages (default: both embedded models, all chapters).
# COLD=1 also gives the installers empty caches (a new machine; else pip's and uv's caches are the
# user's, as on a developer's machine). It prints one table: each phase's wall time and peak RSS,
# then every page's seconds as the runner recorded them (its run records), and keeps
# the clone's folder (its path is printed) with the full /usr/bin/time -v output of each phase.
# Wall times are only comparable between runs on one quiet machine; interleave A/B runs when not.
set -euo pipefail
ref="${1:-HEAD}"
what="${2:-report}"
case "$what" in setup|report) ;; *) echo "The second argument must be 'setup' or 'report', got '$what'." >&2; exit 2;; esac
here="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d "${TMPDIR:-/tmp}/fairnb-fresh-XXXXXX")"
clone="$work/fairnb"
git clone -q "$here" "$clone"
git -C "$clone" checkout -q "$(git -C "$here" rev-parse "$ref")"
export FAIRNB_CACHE="$work/fairnb-cache"
if [ "${COLD:-0}" = 1 ]; then
  export UV_CACHE_DIR="$work/uv-cache" PIP_CACHE_DIR="$work/pip-cache"
fi
cd "$clone"
echo "clone of $(git rev-parse --short HEAD) in $clone; installer ${INSTALLER:-uv}; cold caches: ${COLD:-0}; load $(cut -d' ' -f1-3 /proc/loadavg)"

timed() {  # timed NAME COMMAND...: /usr/bin/time -v into $work/NAME.time, the command's output into $work/NAME.log
  local name="$1"; shift
  local status=0
  /usr/bin/time -v -o "$work/$name.time" "$@" >"$work/$name.log" 2>&1 || status=$?
  local wall rss
  wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$work/$name.time")
  rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$work/$name.time")
  printf '| %s | %s | %s MiB | %s |\n' "$name" "$wall" "$((rss / 1024))" "$status" >>"$work/summary.md"
  return 0
}

printf '| phase | wall | peak RSS (one process) | exit |\n|---|---|---|---|\n' >"$work/summary.md"
timed setup make .venv/.installed
if [ "$what" = report ]; then
  models="${MODELS:-default,gemma-3-270m}"
  timed pages .venv/bin/python -m fairnb run --models "$models" --chapters "${CHAPTERS:-all}" --out book/runs
  timed book .venv/bin/python -m fairnb book --runs book/runs
  printf '\n| page | seconds (runner) |\n|---|---|\n' >>"$work/summary.md"
  # the run records: book/runs/results/<model>/<page>.run.json ({"run": {"seconds"}}), before 2026-12-04
  # book/runs/<model>/<page>.run.json ({"seconds"})
  for record in book/runs/results/*/*.run.json book/runs/*/*.run.json; do
    [ -e "$record" ] || continue
    seconds=$(.venv/bin/python -c 'import json, sys; r = json.load(open(sys.argv[1]))
print(r.get("run", r).get("seconds", "–"))' "$record")
    printf '| %s | %s |\n' "${record#book/runs/}" "$seconds" >>"$work/summary.md"
  done
fi
echo "load at the end $(cut -d' ' -f1-3 /proc/loadavg); logs and /usr/bin/time -v output in $work"
cat "$work/summary.md"
