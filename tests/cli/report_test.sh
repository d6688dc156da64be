#!/usr/bin/env bash
# report.html in a real browser: qfx ptq and qfx qat write it; headless Chromium
# loads it, runs its script without errors, and the graph (one laid-out node per
# deployed node), the SQNR bars and one histogram per observed tensor are in the
# rendered page, counted against report.json; a screenshot is kept as a test
# artefact ($ARTIFACTS/report_*.png). `qfx report DIR` writes the same page again.
# Needs: $QFX, $FIXTURES, $ARTIFACTS, $QFX_PYTHON; graphviz and chromium-headless-shell
# (tools/install_deps.sh installs them).
set -u
pass=0; fail=0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
source "$(dirname "$0")/check.sh"
mkdir -p "$ARTIFACTS"
browser=$(command -v chromium-headless-shell || command -v chromium || echo chromium-headless-shell)

# The rendered DOM's counts against report.json's: "ok" or what differs.
render_check() {  # dir name
  local dir=$1 name=$2
  timeout 120 "$browser" --no-sandbox --disable-gpu --hide-scrollbars --window-size=1400,2400 \
    --screenshot="$ARTIFACTS/report_$name.png" "file://$dir/report.html" >/dev/null 2>&1 || { echo "screenshot failed"; return; }
  timeout 120 "$browser" --no-sandbox --disable-gpu --dump-dom "file://$dir/report.html" 2>/dev/null > "$tmp/$name.dom.html"
  $PY - "$dir/report.json" "$tmp/$name.dom.html" "$ARTIFACTS/report_$name.png" <<'EOF'
import json, re, sys
from PIL import Image
r = json.load(open(sys.argv[1])); dom = open(sys.argv[2]).read()
problems = []
body = re.search(r"<body[^>]*>", dom)
if not body or 'data-ready="1"' not in body.group(0): problems.append("the page's script did not finish")
if not body or 'data-errors="0"' not in body.group(0): problems.append("script errors: " + (body.group(0) if body else "no body"))
kernels = [k for k in r["kernels"] if not k.get("folded")]
graph = dom[dom.find('id="graph"'):dom.find('id="panel"')]
if "<svg" not in graph: problems.append("no laid-out graph")
if len(re.findall(r'<g id="gnode-', graph)) != len(kernels):
    problems.append(f"{len(re.findall(r'<g id=.gnode-', graph))} graph nodes for {len(kernels)} deployed nodes")
layers = r.get("per_layer_sqnr", {}).get("layers", [])
bars = len(re.findall(r'<rect class="bar fq"', dom))
if bars != len(layers): problems.append(f"{bars} SQNR bars for {len(layers)} layers")
hist = len(re.findall(r'<svg class="hist"', dom))
if hist != len(r.get("observers", [])) or hist == 0: problems.append(f"{hist} histograms for {len(r.get('observers', []))} observers")
if len(re.findall(r'<svg class="wrange"', dom)) != len(r.get("weights", [])): problems.append("weight range charts missing")
im = Image.open(sys.argv[3]).convert("RGB").resize((140, 240))
if len(set(im.getdata())) < 20: problems.append("the screenshot is nearly blank")
print("ok" if not problems else "; ".join(problems))
EOF
}

check "qfx ptq writes report.html and lists it in report.json's outputs" 0 "^listed$" -- bash -c \
  "'$QFX' ptq --set calibration.num_samples=64 --set evaluation.num_samples=256 --set evaluation.sqnr_samples=32 \
     --set evaluation.reference_check=0 --set output.dir='$tmp/ptq' >/dev/null 2>&1 || exit 1
   $PY -c \"import json; o = json.load(open('$tmp/ptq/report.json'))['outputs']; print('listed' if '$tmp/ptq/report.html' in o else o)\""
check "report.html of qfx ptq in headless Chromium: script ran without errors; graph, SQNR bars, histograms, weight ranges all there" 0 "^ok$" -- \
  render_check "$tmp/ptq" ptq
check "report.html is self-contained (no reference to another file or address)" 0 "^0$" -- $PY -c "
import re; h = open('$tmp/ptq/report.html').read()
print(len([u for u in re.findall(r'(?:https?:|file:)//[^\"\' <>]*|\\bsrc=|<link\\b', h) if not u.startswith('http://www.w3.org/')]))"
check "qfx report DIR writes the same page again" 0 "^same$" -- bash -c \
  "cp '$tmp/ptq/report.html' '$tmp/first.html' && rm '$tmp/ptq/report.html' && '$QFX' report '$tmp/ptq' >/dev/null &&
   cmp -s '$tmp/first.html' '$tmp/ptq/report.html' && echo same"
check "qfx report on a folder without report.json" 7 "report.json: cannot open" -- "$QFX" report "$tmp"
echo '{"a": 1}' > "$tmp/report.json"
check "qfx report on a JSON file that is not a report" 6 "not a report.json written by qfx ptq or qfx qat" -- "$QFX" report "$tmp"
rm "$tmp/report.json"
check "report.html splits each layer's error into its own and the inherited part, one row per layer" 0 "^ok$" -- $PY -c "
import json, re; r = json.load(open('$tmp/ptq/report.json')); h = open('$tmp/ptq/report.html').read()
layers = r['per_layer_sqnr']['layers']
assert all('sqnr_db_own' in l and 'sqnr_db_inherited' in l for l in layers), layers[0]
table = h[h.find('<h2>Own and inherited error'):]
table = table[:table.find('</table>')]
print('ok' if table.count('<tr><td>') == len(layers) else (table.count('<tr><td>'), len(layers)))"

# Several runs of one model side by side: the onednn run above and one on tflite_like.
check "qfx ptq of the same model on tflite_like" 0 "wrote " -- "$QFX" ptq --set calibration.num_samples=64 \
  --set evaluation.num_samples=256 --set evaluation.sqnr_samples=32 --set evaluation.reference_check=0 --set backend=tflite_like \
  --set output.dir="$tmp/ptq_tfl"
check "qfx report DIR1 DIR2: each run's top-1 and per-layer SQNR as its report.json has them, most different first; the page written" \
  0 "^ok$" -- bash -c "cd '$tmp' && '$QFX' report ptq ptq_tfl -o '$tmp/cmp.html' > '$tmp/cmp.txt' && $PY - <<'EOF'
import json, re
runs = [json.load(open(f'$tmp/{d}/report.json')) for d in ('ptq', 'ptq_tfl')]
text = open('$tmp/cmp.txt').read().splitlines()
assert re.match(r'\s+ptq\s+ptq_tfl$', text[0]), text[0]
row = next(l for l in text if l.strip().startswith('top-1 int8 '))
got = [float(v) for v in re.findall(r'([0-9.]+) %', row)]
assert all(abs(g - 100 * r['evaluation']['top1_int8']) < 0.01 for g, r in zip(got, runs)) and len(got) == 2, row
def db(l): return l.get('sqnr_db_int8', l['sqnr_db_fakequant'])
want = [{l['node']: db(l) for l in r['per_layer_sqnr']['layers']} for r in runs]
rows = text[text.index('per-layer SQNR, most different first:') + 2:]
rows = [l.split() for l in rows if l.startswith('  ') and 'dB' in l]
spreads = []
for node, a, _, b, _, spread, _ in rows:
    assert abs(float(a) - want[0][node]) <= 0.01 * abs(want[0][node]) and abs(float(b) - want[1][node]) <= 0.01 * abs(want[1][node]), node
    spreads.append(float(spread))
assert len(rows) == min(15, len(want[0])) and spreads == sorted(spreads, reverse=True), spreads
h = open('$tmp/cmp.html').read()
assert h.count('<tr><td>') >= len(want[0]) + 10 and 'ptq_tfl' in h
print('ok')
EOF"
check "qfx report DIR1 DIR2 with a folder without report.json: exit 7 naming it, no page" 7 "nothing/report.json: cannot open" -- \
  bash -c "mkdir -p '$tmp/nothing' && '$QFX' report '$tmp/ptq' '$tmp/nothing' -o '$tmp/cmp2.html'; rc=\$?; [ -e '$tmp/cmp2.html' ] && echo written; exit \$rc"
check "output.report_html: false writes none" 0 "^none$" -- bash -c \
  "'$QFX' ptq --set calibration.num_samples=32 --set evaluation=null --set output.report_html=false --set output.dir='$tmp/nohtml' \
     >/dev/null 2>&1 && { [ -e '$tmp/nohtml/report.html' ] && echo written || echo none; }"

$PY -c "import numpy; numpy.save('$tmp/x32.npy', numpy.random.default_rng(3).normal(0, 1, (16, 3, 32, 32)).astype(numpy.float32))"
# Lookup tables (ELU, Mish as a QLut) carry the SQNR of the value they write; a
# report.json edited by hand is refused naming the entry; 3 million histogram bins and
# a 300-character node name still make a small page with short labels.
lut_sqnr() {  # every QLut / conv / gemm node in the page's panel data has an SQNR: "ok" and the QLut count
  $PY - "$tmp/act/report.json" "$tmp/act/report.html" <<'EOF'
import json, re, sys
r = json.load(open(sys.argv[1])); h = open(sys.argv[2]).read()
data = json.loads(re.search(r'id="qfx-data">(.*?)</script>', h).group(1).replace('<\\/', '</'))['kernels']
luts = [k['node'] for k in r['kernels'] if k['op'] == 'QLut']
missing = [k['node'] for k in r['kernels'] if k['op'] in ('QLut', 'QLinearConv', 'QGemm') and 'sqnr_fq' not in data[k['node']]]
print('ok' if not missing else missing, len(luts))
EOF
}
small_page() {  # the edited page: its size, the graph's label lengths, the histogram bars
  $PY - "$tmp/edit/report.html" <<'EOF'
import os, re, sys
h = open(sys.argv[1]).read(); g = h[h.find('id="graph"'):h.find('id="panel"')]
long = [t for t in re.findall(r'<text[^>]*>([^<]*)</text>', g) if len(t) > 28]
bars, hists = len(re.findall('<rect class="hbar"', h)), len(re.findall('<svg class="hist"', h))
size = os.path.getsize(sys.argv[1])
print('ok' if size < 400000 and not long and bars <= 256 * hists and 'n' * 300 in h else (size, long[:3], bars))
EOF
}
edit() {  # a copy of the act_net output with report.json changed by a python statement on r
  rm -rf "$tmp/edit" && cp -r "$tmp/act" "$tmp/edit" &&
    $PY -c "import json; r = json.load(open('$tmp/edit/report.json')); $1; json.dump(r, open('$tmp/edit/report.json', 'w'))"
}
check "qfx ptq on act_net (ELU, and Mish as one lookup table)" 0 "^ran$" -- bash -c \
  "'$QFX' ptq --set model.path='$FIXTURES/act_net.pt2' --set 'model.input_shape=[-1, 3, 32, 32]' \
     --set 'calibration.data={format: npy, images: $tmp/x32.npy}' --set calibration.num_samples=16 \
     --set 'evaluation.data={format: npy, images: $tmp/x32.npy}' --set evaluation.metric=cosine --set evaluation.sqnr_samples=8 \
     --set evaluation.reference_check=0 --set output.dir='$tmp/act' > '$tmp/act.log' 2>&1 && echo ran || tail -3 '$tmp/act.log'"
check "... every node of the graph, lookup tables included, carries its per-layer SQNR" 0 "^ok 3$" -- lut_sqnr
edit "r['calibration']['seconds'] = 'fast'"
check "qfx report: a report.json entry of the wrong type is named (exit 6), the old report.html kept" 6 \
  "report.json: calibration.seconds is a string; qfx writes a number there" -- \
  bash -c "'$QFX' report '$tmp/edit'; rc=\$?; cmp -s '$tmp/edit/report.html' '$tmp/act/report.html' || echo changed; exit \$rc"
edit "r['kernels'][2]['outputs'] = [7]"
check "... inside a list of a list" 6 "report.json: kernels\[2\]\.outputs\[0\] is an integer; qfx writes a string there" -- "$QFX" report "$tmp/edit"
edit "r['target_arithmetic'] = {'arithmetic': {'requantize': 'fast'}}"
check "... a target arithmetic qfx does not know" 6 "target_arithmetic: .*requantize" -- "$QFX" report "$tmp/edit"
edit "r['observers'][0]['hist']['counts'] = [1] * 3000000; r['kernels'][1]['node'] = 'n' * 300"
check "qfx report: 3 million histogram bins and a 300-character node name: a page under 400 KB, graph labels of at most 28 characters" \
  0 "^written$" -- bash -c "'$QFX' report '$tmp/edit' >/dev/null && echo written"
check "... the page" 0 "^ok" -- small_page
check "... rendered in headless Chromium" 0 "^ok$" -- render_check "$tmp/edit" edited
# A transformer (Swin: hundreds of nodes, matmuls, LayerNorm, softmax): the page stays small.
check "qfx ptq of the Swin fixture writes a report.html under 3 MB" 0 "^ok [0-9]+$" -- bash -c \
  "'$QFX' ptq --set model.path='$FIXTURES/swin_tiny.pt' --set 'model.input_shape=[-1, 3, 32, 32]' \
     --set 'calibration.data={format: npy, images: $tmp/x32.npy}' --set calibration.num_samples=16 --set calibration.batch_size=8 \
     --set 'evaluation.data={format: npy, images: $tmp/x32.npy}' --set evaluation.metric=cosine --set evaluation.sqnr_samples=4 \
     --set evaluation.reference_check=0 --set output.dir='$tmp/swin' > '$tmp/swin.log' 2>&1 || { tail -3 '$tmp/swin.log'; exit 1; }
   size=\$(stat -c %s '$tmp/swin/report.html'); [ \$size -lt 3000000 ] && echo ok \$size || echo \$size bytes"
check "... rendered in headless Chromium" 0 "^ok$" -- render_check "$tmp/swin" swin

# QAT: the training curve (loss, training accuracy; fake-quant, float and int8 top-1).
check "qfx qat writes report.html" 0 "wrote .*report.html" -- \
  "$QFX" qat --set training.num_samples=512 --set training.epochs=2 --set training.batch_size=64 --set calibration.num_samples=64 \
    --set evaluation.num_samples=256 --set output.dir="$tmp/qat"
check "qfx qat: report.json's training curve (every step here) ends with the fake-quant top-1; the page draws the curves" 0 "^ok$" -- \
  $PY -c "
import json, re
c = json.load(open('$tmp/qat/report.json'))['training']['curve']; h = open('$tmp/qat/report.html').read()
ok = len(c) == 16 and [p['step'] for p in c] == list(range(1, 17)) and 'top1_fakequant' in c[-1]
print('ok' if ok and len(re.findall('<polyline class=\"series\"', h)) >= 3 else (len(c), c[-1]))"
check "... rendered in headless Chromium" 0 "^ok$" -- render_check "$tmp/qat" qat

check_encodings "$tmp"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
