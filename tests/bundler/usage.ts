// What a TypeScript app writes against webpte; `npm run typecheck` (tsc --noEmit --strict)
// checks it against the declarations in types/. Type-checked only, never run.
import {
  CACHE_NAME, ContextFullError, PteFormatError, WebpteError, checkCapabilities, deleteModelFromCache,
  hasModelInCache, listCachedModels, loadModel, loadProgram, type Model, type Program,
} from 'webpte';
import { InputError } from 'webpte/errors';

export async function runProgram(bytes: ArrayBuffer): Promise<Float32Array> {
  const program: Program = await loadProgram(bytes, { onProgress: (e) => console.log(e.stage, e.loaded, e.total) });
  const [logits] = await program.run([new Float32Array(4), new BigInt64Array([0n])]);
  await program.reset();
  await program.dispose();
  return logits as Float32Array;
}

export async function answer(question: string, signal: AbortSignal): Promise<string> {
  const caps = await checkCapabilities();
  if (caps.problems.length) throw new Error(caps.problems.join('; '));
  const model: Model = await loadModel('/models/smollm2/', { onProgress: (e) => console.log(e.stage, e.etaSeconds) });
  let text = '';
  try {
    for await (const ev of model.generate({ prompt: question, maxNewTokens: 32, signal })) {
      if (ev.type === 'text') text += ev.text;
      else console.log(ev.stopReason, ev.decodeTokensPerSecond);
    }
  } catch (err) {
    if (err instanceof ContextFullError) await model.reset();
    else if (err instanceof PteFormatError || err instanceof InputError) console.error(err.message);
    else if (err instanceof WebpteError) throw err;
  }
  console.log(CACHE_NAME, model.name, model.maxContext);
  return text;
}

export async function freeSpace(): Promise<number> {
  let freed = 0;
  for (const m of await listCachedModels()) {
    console.log(m.name ?? m.base, m.bytes, m.complete, m.files.map((f) => `${f.name} ${f.bytes}`));
    if (await hasModelInCache(m.base)) freed += (await deleteModelFromCache(m.base)).bytes;
  }
  return freed;
}
