#!/usr/bin/env bash
# The README's command tour, run as a user runs it: every `build/tools/qfx` line of
# the README's shell blocks, in order, from a scratch folder that sees the source
# tree's configs/ and .venv/ and the build tree as build/ (so the lines run
# verbatim). Two changes, to keep the test short: `qfx ptq` and `qfx qat` lines get
# smaller sample counts appended (--set overrides of keys the lines do not set) and
# `qfx bench` lines `--iters 2`; a line that opens a browser is skipped. A line that
# fails fails the test with its output. Needs $SRC and $BUILD.
set -u
pass=0; fail=0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
ln -s "$SRC/configs" "$tmp/configs"; ln -s "$BUILD" "$tmp/build"
[ -d "$SRC/.venv" ] && ln -s "$SRC/.venv" "$tmp/.venv"
quick_ptq=(--set evaluation.num_samples=16 --set evaluation.reference_check=4 --set evaluation.sqnr_samples=4)
quick_qat=(--set training.max_steps=10 --set training.num_samples=640 --set evaluation.num_samples=500
           --set evaluation.reference_check=100)
# The README's shell blocks, their `build/tools/qfx`, `.venv/bin/python` and `cd` lines.
mapfile -t lines < <(awk '/^```sh/{c=1; next} /^```/{c=0} c' "$SRC/README.md" \
  | sed 's/[[:space:]]#.*$//' | grep -E '^(build/tools/qfx|\.venv/bin/python|xdg-open) ')
[ "${#lines[@]}" -ge 5 ] || { echo "FAIL: found ${#lines[@]} tour lines in README.md"; exit 1; }
cd "$tmp"
for line in "${lines[@]}"; do
  case "$line" in xdg-open*) echo "skip (browser): $line"; continue ;; esac
  extra=()
  case "$line" in
    "build/tools/qfx ptq"*) extra=("${quick_ptq[@]}") ;;
    "build/tools/qfx qat"*) extra=("${quick_qat[@]}") ;;
    "build/tools/qfx bench"*) extra=(--iters 2) ;;
  esac
  eval "words=($line)"
  t0=$SECONDS
  if out=$("${words[@]}" "${extra[@]}" 2>&1) && ! grep -qE "terminate called|Segmentation|frame #" <<<"$out"; then
    echo "ok ($((SECONDS - t0)) s): $line"; pass=$((pass + 1))
  else
    echo "FAIL (exit $?): $line"; echo "$out" | tail -n 20; fail=$((fail + 1))
  fi
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
