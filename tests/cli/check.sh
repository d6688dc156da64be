# check NAME EXPECTED_RC PATTERN -- COMMAND...: runs COMMAND, expects its exit code
# and a line matching PATTERN (extended regex), and no crash or stack dump.
# Counts into $pass / $fail. Sourced by the CLI test scripts.
# $PY: the Python with numpy, torch and onnxruntime (CMake passes QFX_PYTHON).
PY=${QFX_PYTHON:-python3}
check() {  # name expected_rc pattern -- command...
  local name=$1 want=$2 pattern=$3; shift 4
  local out rc
  out=$("$@" 2>&1); rc=$?
  if [ "$rc" -ne "$want" ]; then
    echo "FAIL $name: exit $rc, expected $want"; echo "$out" | head -5; fail=$((fail+1)); return
  fi
  if ! grep -qE -- "$pattern" <<<"$out"; then
    echo "FAIL $name: output lacks /$pattern/"; echo "$out" | head -5; fail=$((fail+1)); return
  fi
  if grep -qE "terminate called|Segmentation|Exception raised from|frame #" <<<"$out"; then
    echo "FAIL $name: crash or stack dump in output"; fail=$((fail+1)); return
  fi
  echo "ok   $name"; pass=$((pass+1))
}
# check_encodings DIR: every encodings.json under DIR (what the calling script wrote)
# follows docs/encodings.schema.json.
check_encodings() {
  check "every encodings.json this script wrote follows docs/encodings.schema.json" 0 "^ok [0-9]+" -- \
    "$PY" "$(dirname "${BASH_SOURCE[0]}")/../../tools/schema/validate_encodings.py" "$1"
}
