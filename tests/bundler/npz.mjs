// Read a numpy .npz (a zip of .npy files, stored or deflated) in Node: {name: {dtype, shape, data}}.
// Enough for the committed fixtures' references (little-endian, C order).
import { readFileSync } from 'node:fs';
import { inflateRawSync } from 'node:zlib';

const DTYPES = { '<f4': 'float32', '<f8': 'float64', '<i8': 'int64', '<i4': 'int32', '|i1': 'int8', '|u1': 'uint8', '|b1': 'bool' };

function npy(buf) {
  const major = buf[6];
  const headerLen = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const start = major === 1 ? 10 : 12;
  const header = buf.subarray(start, start + headerLen).toString('latin1');
  const descr = /'descr':\s*'([^']+)'/.exec(header)[1];
  if (/'fortran_order':\s*True/.test(header)) throw new Error('fortran-order arrays are not supported');
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(',').map((s) => s.trim()).filter(Boolean).map(Number);
  if (!(descr in DTYPES)) throw new Error(`npy dtype ${descr} is not supported`);
  return { dtype: DTYPES[descr], shape, bytes: buf.subarray(start + headerLen) };
}

/** @param {string} path */
export function readNpz(path) {
  const zip = readFileSync(path);
  const out = {};
  let at = 0;
  while (zip.readUInt32LE(at) === 0x04034b50) {
    const method = zip.readUInt16LE(at + 8);
    let compressed = zip.readUInt32LE(at + 18);
    const nameLen = zip.readUInt16LE(at + 26);
    const extraLen = zip.readUInt16LE(at + 28);
    const name = zip.subarray(at + 30, at + 30 + nameLen).toString();
    const dataAt = at + 30 + nameLen + extraLen;
    if (compressed === 0xffffffff) { // zip64 (numpy writes it): sizes in the extra field 0x0001
      for (let e = at + 30 + nameLen; e < dataAt; e += 4 + zip.readUInt16LE(e + 2)) {
        if (zip.readUInt16LE(e) === 1) compressed = Number(zip.readBigUInt64LE(e + 12));
      }
    }
    const raw = zip.subarray(dataAt, dataAt + compressed);
    out[name.replace(/\.npy$/, '')] = npy(method === 8 ? inflateRawSync(raw) : raw);
    at = dataAt + compressed;
  }
  return out;
}
