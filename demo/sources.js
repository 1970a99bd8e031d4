// Model sources the page offers, and what it can tell about a model before loading it
// (its name, whether it takes images) without downloading anything large.

/** The published SmolVLM files (shared/docs/smolvlm-files.md); loadModel checks their sha256. */
export const HUB_URL = 'https://huggingface.co/executorch-community/SmolVLM-500M-Instruct-ExecuTorch-WebGPU/resolve/main/';

/** The built SmolLM2 text model that `make demo` serves beside the page. */
export const BUNDLED_URL = './models/smollm2/';

const META = 'webpte_model.json';
const SMOLVLM_MARKERS = ['smolvlm_decoder_q8.pte', 'vlm_meta.json'];

/** A file's path inside the chosen folder, without the folder's own name. */
export function relativePath(file) {
  const full = file.webkitRelativePath || file.name;
  const slash = full.indexOf('/');
  return slash >= 0 ? full.slice(slash + 1) : full;
}

/**
 * What a list of files (a picked or dropped model folder) holds:
 * `{folder, files, bytes, name, vision, problem}`; `problem` says why it is not a model folder.
 * @param {File[]} files
 */
export async function describeFolder(files) {
  const byPath = new Map(files.map((f) => [relativePath(f), f]));
  const folder = (files[0]?.webkitRelativePath || '').split('/')[0] || 'dropped files';
  const bytes = files.reduce((n, f) => n + f.size, 0);
  const out = { folder, files, bytes, name: folder, vision: false, problem: null };
  if (byPath.has(META)) {
    try {
      const meta = JSON.parse(await byPath.get(META).text());
      return { ...out, name: meta.name ?? folder, vision: meta.vision != null };
    } catch (err) {
      return { ...out, problem: `${META} is not valid JSON (${err.message})` };
    }
  }
  if (SMOLVLM_MARKERS.some((p) => byPath.has(p))) {
    return { ...out, name: 'SmolVLM-500M-Instruct', vision: true };
  }
  return { ...out, problem: `neither ${META} nor the published SmolVLM files (${SMOLVLM_MARKERS.join(', ')}) are in it` };
}

/** The bundled model's meta, or null when this site was published without it. */
export async function bundledMeta() {
  try {
    const resp = await fetch(new URL(META, new URL(BUNDLED_URL, location.href)));
    return resp.ok ? await resp.json() : null;
  } catch {
    return null;
  }
}

function entryFile(entry) {
  return new Promise((resolve, reject) => entry.file(resolve, reject));
}

async function readAll(dir) {
  const reader = dir.createReader();
  const out = [];
  for (;;) {
    const batch = await new Promise((resolve, reject) => reader.readEntries(resolve, reject));
    if (!batch.length) return out;
    out.push(...batch);
  }
}

async function walk(entry, prefix, into) {
  if (entry.isFile) {
    const file = await entryFile(entry);
    // Same shape as a folder picked with <input webkitdirectory>: "folder/sub/name".
    Object.defineProperty(file, 'webkitRelativePath', { value: prefix + entry.fullPath.slice(1) });
    into.push(file);
  } else if (entry.isDirectory) {
    for (const child of await readAll(entry)) await walk(child, prefix, into);
  }
}

/**
 * The files of a drop (folders walked recursively). Call it synchronously from the drop
 * handler: the DataTransfer items are only readable during the event.
 * @param {DataTransfer} dataTransfer
 * @returns {Promise<File[]>}
 */
export function droppedFiles(dataTransfer) {
  const entries = [...dataTransfer.items].map((item) => item.webkitGetAsEntry?.()).filter(Boolean);
  if (!entries.length) return Promise.resolve([...dataTransfer.files]);
  // One folder keeps its name as the first path segment; loose files get a stand-in one.
  const prefix = entries.length === 1 && entries[0].isDirectory ? '' : 'dropped files/';
  return (async () => {
    const files = [];
    for (const e of entries) await walk(e, prefix, files);
    return files;
  })();
}
