#!/usr/bin/env node
// Runs an ONNX model with ONNX Runtime (npm onnxruntime-node, CPU): the
// independent check of qfx's runtime.
//   node tools/ort_check/run.js MODEL.onnx OUT.npy IN.npy [IN2.npy ...]
// Inputs are matched to the model's inputs in order; the first output is saved.
// Exit codes: 0 ok, 2 usage, 3 onnxruntime-node not installed, 4 ONNX Runtime error.
'use strict';
const fs = require('fs');
const path = require('path');

let ort;
try {
  ort = require(path.join(__dirname, 'node_modules', 'onnxruntime-node'));
} catch (e) {
  console.error('onnxruntime-node is not installed (tools/install_deps.sh installs it into tools/ort_check)');
  process.exit(3);
}

const DTYPES = { '<f4': ['float32', Float32Array], '|u1': ['uint8', Uint8Array], '|i1': ['int8', Int8Array],
                 '<i8': ['int64', BigInt64Array], '<i4': ['int32', Int32Array] };

function readNpy(file) {
  const buf = fs.readFileSync(file);
  if (buf.toString('latin1', 1, 6) !== 'NUMPY') throw new Error(file + ': not a .npy file');
  const major = buf[6];
  const hlen = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const start = (major === 1 ? 10 : 12) + hlen;
  const header = buf.toString('latin1', major === 1 ? 10 : 12, start);
  const descr = /'descr':\s*'([^']+)'/.exec(header)[1];
  if (/'fortran_order':\s*True/.test(header)) throw new Error(file + ': Fortran order is not supported');
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(',').map(s => s.trim()).filter(s => s).map(Number);
  const [type, Arr] = DTYPES[descr] || [];
  if (!type) throw new Error(file + ': dtype ' + descr + ' is not supported');
  const bytes = buf.subarray(start);
  const data = new Arr(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length));
  return new ort.Tensor(type, data, shape);
}

function writeNpy(file, tensor) {
  const descr = { float32: '<f4', uint8: '|u1', int8: '|i1', int64: '<i8', int32: '<i4' }[tensor.type];
  const dims = tensor.dims.length === 1 ? `${tensor.dims[0]},` : tensor.dims.join(', ');
  let header = `{'descr': '${descr}', 'fortran_order': False, 'shape': (${dims}), }`;
  const total = 10 + header.length + 1;
  header += ' '.repeat((64 - (total % 64)) % 64) + '\n';
  const pre = Buffer.alloc(10);
  pre.write('\x93NUMPY', 0, 'latin1');
  pre[6] = 1; pre[7] = 0;
  pre.writeUInt16LE(header.length, 8);
  const data = Buffer.from(tensor.data.buffer, tensor.data.byteOffset, tensor.data.byteLength);
  fs.writeFileSync(file, Buffer.concat([pre, Buffer.from(header, 'latin1'), data]));
}

async function main() {
  const [model, out, ...ins] = process.argv.slice(2);
  if (!model || !out || ins.length === 0) {
    console.error('usage: run.js MODEL.onnx OUT.npy IN.npy [IN2.npy ...]');
    process.exit(2);
  }
  let session;
  try {
    session = await ort.InferenceSession.create(model, { graphOptimizationLevel: process.env.ORT_OPT || 'all', intraOpNumThreads: 2 });
  } catch (e) {
    console.error('ONNX Runtime cannot load ' + model + ': ' + e.message);
    process.exit(4);
  }
  const feeds = {};
  session.inputNames.forEach((name, i) => { feeds[name] = readNpy(ins[i]); });
  const result = await session.run(feeds);
  writeNpy(out, result[session.outputNames[0]]);
}

main().catch(e => { console.error(e.message); process.exit(4); });
