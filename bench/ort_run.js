// Peer measurement: ONNX Runtime (onnxruntime-node), batch 1, THREADS intra-op
// threads (default 1).
// usage: node bench/ort_run.js MODEL.onnx INPUT.npy RUNS [THREADS]  -> prints "median_ms X"
const ort = require('onnxruntime-node');
const fs = require('fs');

function readNpyF32(path) {
  const buf = fs.readFileSync(path);
  const hlen = buf.readUInt16LE(8);
  const header = buf.slice(10, 10 + hlen).toString('latin1');
  const shape = header.match(/'shape': \(([^)]*)\)/)[1].split(',').filter(s => s.trim()).map(Number);
  const data = new Float32Array(buf.buffer.slice(buf.byteOffset + 10 + hlen, buf.byteOffset + buf.length));
  return new ort.Tensor('float32', data, shape);
}

(async () => {
  const [model, input, runs, threads] = process.argv.slice(2);
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: Number(threads || 1), interOpNumThreads: 1, executionMode: 'sequential',
  });
  const feeds = { [session.inputNames[0]]: readNpyF32(input) };
  await session.run(feeds); // warm-up
  const times = [];
  for (let i = 0; i < Number(runs || 5); i++) {
    const t0 = process.hrtime.bigint();
    await session.run(feeds);
    times.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  times.sort((a, b) => a - b);
  console.log(`median_ms ${times[Math.floor(times.length / 2)].toFixed(2)}`);
})();
