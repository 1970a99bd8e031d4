// Typed errors: class hierarchy, names, wire round trips, re-exports of the public API.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as errors from '../../web/errors.js';

const { AdapterError, AdapterLimitsError, NoWebGPUError, UnsupportedOpError, WebpteError, errorFromWire, errorToWire } = errors;
const PY_NAMES = ['WebpteError', 'PteFormatError', 'UnsupportedOpError', 'PlanError', 'InputError', 'AdapterError',
  'ExternalDataError'];

test('every Python error class has a JS class of the same name', () => {
  for (const name of PY_NAMES) {
    const err = errorFromWire({ name, message: 'm' });
    assert.equal(err.name, name);
    assert.ok(err instanceof WebpteError, name);
    assert.ok(err instanceof errors[name], name);
  }
});

test('adapter errors are AdapterErrors', () => {
  assert.ok(new NoWebGPUError('x') instanceof AdapterError);
  const e = new AdapterLimitsError('x', { limit: 'maxBufferSize', needed: 9, allowed: 4 });
  assert.ok(e instanceof AdapterError && e instanceof WebpteError);
  const back = errorFromWire(errorToWire(e));
  assert.ok(back instanceof AdapterLimitsError);
  assert.deepEqual([back.limit, back.needed, back.allowed], ['maxBufferSize', 9, 4]);
});

test('ExternalDataError carries its key and file across the wire', () => {
  const back = errorFromWire(errorToWire(new errors.ExternalDataError('gone', { key: 'fc.weight', file: 'a.ptd' })));
  assert.ok(back instanceof errors.ExternalDataError);
  assert.deepEqual([back.key, back.file, back.message], ['fc.weight', 'a.ptd', 'gone']);
  assert.deepEqual([errorFromWire({ name: 'ExternalDataError', message: 'm' }).key], [null]);
});

test('UnsupportedOpError carries its op list across the wire', () => {
  const back = errorFromWire(errorToWire(new UnsupportedOpError('no kernel', ['a', 'b'])));
  assert.deepEqual(back.ops, ['a', 'b']);
  assert.equal(back.message, 'no kernel');
});

test('foreign errors keep their name and are not WebpteErrors; non-errors become Error', () => {
  const back = errorFromWire(errorToWire(new RangeError('r')));
  assert.equal(back.name, 'RangeError');
  assert.ok(!(back instanceof WebpteError));
  assert.deepEqual(errorToWire('oops'), { name: 'Error', message: 'oops' });
  assert.equal(errorFromWire({ name: 'constructor', message: 'x' }).name, 'constructor');
});

test('web/index.js re-exports every error class', async () => {
  // index.js touches Worker only when a program is loaded.
  const index = await import('../../web/index.js');
  for (const [name, cls] of Object.entries(errors)) {
    if (typeof cls === 'function' && cls.prototype instanceof Error) assert.equal(index[name], cls, name);
  }
  assert.equal(typeof index.loadProgram, 'function');
  await assert.rejects(index.loadProgram(42), errors.InputError);
  await assert.rejects(index.loadProgram('model.pte'), (e) => e instanceof errors.WorkerError && /Web Workers/.test(e.message));
});
