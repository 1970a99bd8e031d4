/**
 * @typedef {object} TextEvent a piece of the answer
 * @property {'text'} type
 * @property {string} text
 */
/**
 * @typedef {object} DoneEvent the end of a turn
 * @property {'done'} type
 * @property {number[]} tokenIds generated ids
 * @property {string} text the whole answer
 * @property {number} promptRows positions of the conversation's prompt
 * @property {number} reusedRows positions kept in the KV cache from earlier turns
 * @property {number} computedRows prompt positions fed through the decoder
 * @property {number} prefillWindows the prompt's decoder windows
 * @property {number} prefillWindowsRun of them, those computed (fewer when aborted during prefill)
 * @property {number} prefillSubmits GPU submits they took (sized so an abort is seen about every 0.25 s)
 * @property {number} newTokens
 * @property {number} prefillTokensPerSecond
 * @property {number} decodeTokensPerSecond
 * @property {number} prefillSeconds
 * @property {number} decodeSeconds
 * @property {number} visionSeconds
 * @property {number} samplingSeconds of decodeSeconds, in the Python sampler
 * @property {'stop_token' | 'stop_sequence' | 'max_new_tokens' | 'context_full' | 'aborted'} stopReason
 */
/** @typedef {TextEvent | DoneEvent} GenerateEvent */
/**
 * @typedef {object} Capabilities what `checkCapabilities` finds
 * @property {boolean} webgpu
 * @property {{vendor: string, architecture: string, device: string, description: string,
 *   isFallbackAdapter: boolean} | null} adapter
 * @property {Record<string, number>} limits
 * @property {string[]} features
 * @property {string[]} wgslFeatures
 * @property {string[]} problems why models cannot run here (empty: they can)
 * @property {string[]} warnings what will be slow or not kept
 */
/**
 * Load a model folder into the page's webpte worker: fetch (or read) every file, check the
 * pinned sha256 values, boot Python, plan and upload the programs.
 *
 * A folder is either webpte's layout (`webpte_model.json` naming the files, with their sha256)
 * or the published SmolVLM repo's (`smolvlm_decoder_q8.pte`, `smolvlm_vision_q8.pte`,
 * `embed_tokens.i8.bin`, `embed_tokens.scale.f32.bin`, `vlm_meta.json`, `tokenizer/...`, checked
 * against the pinned hashes). Fetched files with a pinned hash are kept in the Cache API
 * (`CACHE_NAME`); a cached copy that fails its hash is fetched again.
 *
 * @param {string | URL | {files: File[] | FileList}} source the folder's base URL (file `name` is
 *   fetched from `${base}${name}`; a missing trailing '/' is added), or local files (e.g. from
 *   `<input type=file webkitdirectory>` or a drop) matched by relative path, else by name
 * @param {object} [options]
 * @param {(event: {stage: 'fetch'|'verify'|'cache'|'python'|'plan'|'upload'|'compile'|'ready', file?: string,
 *   loaded?: number, total?: number, fileLoaded?: number, fileTotal?: number, etaSeconds?: number | null,
 *   stored?: false, error?: {name: 'QuotaError' | 'WebpteError', message: string}}) => void}
 *   [options.onProgress] `fetch`: `loaded`/`total` bytes over all files of the model (the
 *   programs' bytes count as they stream into the GPU, after `upload`); `verify` of the held files:
 *   `fileLoaded`/`fileTotal` of `file`, `etaSeconds` at the network rate (null until known);
 *   plan/upload/compile come once per program (decoder, then vision); `cache` (`stored: false`,
 *   `error`) when the browser refused to store `file`: the model loads without it cached
 * @param {boolean} [options.verify] check pinned sha256 values (default true)
 * @param {boolean} [options.cache] keep fetched files in the Cache API (default true)
 * @param {'all' | 'elementwise' | 'none'} [options.fusion] how much the planner fuses
 *   (default 'all'; see loadProgram)
 * @param {boolean} [options.preflight] before any file is downloaded, plan the programs from
 *   their flatbuffer ranges (HTTP Range requests) and check the device's limits (default true)
 * @param {'default' | Record<string, number> | null} [options.limits] 'default': the programs
 *   are planned for and run on a device with WebGPU's default limits (weights past a binding
 *   are split); an object caps some limits the same way
 *   (e.g. `{maxStorageBufferBindingSize: 2 ** 27}`), and `deviceMemory`, a budget in bytes for a
 *   program's buffers, checked by the preflight (of files to download: cached and local files
 *   are not preflighted)
 * @param {boolean} [options.autotune] time the decoder's decode kernel variants on this adapter
 *   once (cached per adapter and program; see loadProgram) and plan the fastest
 * @param {number} [options.chunkBytes] bytes the programs' files are read in (see loadProgram):
 *   the decoder and vision programs and their data files stream from the network, the cache
 *   or the local file into the GPU buffers, checked against their pinned sha256 as they pass
 *   (a file that fails is neither used nor cached); the embedding table is kept as a Blob,
 *   checked in chunks of this size and read by rows as windows need them; the other files are held
 * @returns {Promise<Model>}
 * @throws {ModelFolderError | HashMismatchError | InputError | PteFormatError |
 *   UnsupportedOpError | PlanError | AdapterError | AdapterLimitsError | WorkerError}
 */
export function loadModel(source: string | URL | {
    files: File[] | FileList;
}, { onProgress, verify, cache, fusion, preflight, limits, autotune, chunkBytes }?: {
    onProgress?: (event: {
        stage: "fetch" | "verify" | "cache" | "python" | "plan" | "upload" | "compile" | "ready";
        file?: string;
        loaded?: number;
        total?: number;
        fileLoaded?: number;
        fileTotal?: number;
        etaSeconds?: number | null;
        stored?: false;
        error?: {
            name: "QuotaError" | "WebpteError";
            message: string;
        };
    }) => void;
    verify?: boolean;
    cache?: boolean;
    fusion?: "all" | "elementwise" | "none";
    preflight?: boolean;
    limits?: "default" | Record<string, number> | null;
    autotune?: boolean;
    chunkBytes?: number;
}): Promise<Model>;
/**
 * What this browser offers webpte, before any download: `{webgpu, adapter: {vendor,
 * architecture, device, description, isFallbackAdapter} | null, limits, features, wgslFeatures,
 * problems, warnings}`. `problems` says why models cannot run here (empty: they can);
 * `warnings` what will be slow or not kept (a software adapter, no Cache API).
 * @param {{gpu?: GPU}} [options]
 * @returns {Promise<Capabilities>}
 */
export function checkCapabilities({ gpu }?: {
    gpu?: GPU;
}): Promise<Capabilities>;
/** A loaded model. Make it with `loadModel`. */
export class Model {
    /** @private */
    private constructor();
    /** @private */
    private client;
    /** @private @type {number} */
    private handle;
    /** Name from the meta file. @type {string} */
    name: string;
    /** 'webpte' or 'smolvlm' (the folder layout). @type {string} */
    layout: string;
    /** Whether the model takes an image (it has a vision program). @type {boolean} */
    hasVision: boolean;
    /** [height, width] the vision program takes, or null. @type {[number, number] | null} */
    imageSize: [number, number] | null;
    /** Positions of the decoder's context (prompt + answer of every turn of a conversation). @type {number} */
    maxContext: number;
    /** Load statistics (ms): fetch_ms, load_ms, per program plan/upload/pipelines timings. @type {Record<string, any>} */
    stats: Record<string, any>;
    disposed: boolean;
    /** @private @type {Set<AbortController>} generations in flight (dispose stops them) */
    private running;
    /** @private @type {Set<string>} data:/blob: image URLs (fixed content) whose pixels the worker holds */
    private imagesSent;
    /**
     * OpenAI-style chat completions (web/chat.js): `model.chat.completions.create({messages, stream, ...})`.
     * @type {{completions: Completions}}
     */
    chat: {
        completions: Completions;
    };
    /**
     * Answer `prompt` (optionally about `image`) in this conversation. Yields
     * `{type: 'text', text}` pieces as they are decoded (a partial UTF-8 character is held back),
     * then one `{type: 'done', tokenIds, text, promptRows, reusedRows, computedRows, newTokens,
     * prefillTokensPerSecond, decodeTokensPerSecond, prefillSeconds, decodeSeconds, visionSeconds,
     * samplingSeconds (of decodeSeconds, in the Python sampler), stopReason: 'stop_token'|
     * 'max_new_tokens'|'context_full'|'aborted'}`. Follow-up calls reuse
     * the KV cache of earlier turns (`reusedRows`); `reset()` starts a new conversation. Leaving
     * the loop early stops the generation (the turn keeps what was generated).
     * @param {object} options
     * @param {string} options.prompt the user's message
     * @param {ImageBitmapSource} [options.image] a picture (File/Blob, <img>, canvas, ImageBitmap,
     *   ImageData) for a model with a vision program; resized to `imageSize` by the browser
     * @param {number} [options.maxNewTokens] default 256
     * @param {number} [options.temperature] 0 (default) is greedy
     * @param {number} [options.topK] 0 (default): no limit
     * @param {number} [options.topP] default 1
     * @param {number} [options.repetitionPenalty] default 1 (none)
     * @param {number} [options.seed] seed of the sampler (same seed, same tokens)
     * @param {AbortSignal} [options.signal] stops generation: the done event says 'aborted'
     * @returns {AsyncGenerator<GenerateEvent>}
     * @throws {ContextFullError | InputError | TemplateError | DeviceLostError | DisposedError}
     */
    generate({ prompt, image, maxNewTokens, temperature, topK, topP, repetitionPenalty, seed, signal }?: {
        prompt: string;
        image?: ImageBitmapSource;
        maxNewTokens?: number;
        temperature?: number;
        topK?: number;
        topP?: number;
        repetitionPenalty?: number;
        seed?: number;
        signal?: AbortSignal;
    }): AsyncGenerator<GenerateEvent>;
    /**
     * Start a new conversation (forget the turns, zero the KV cache). Requests are served in
     * order, so a generate() after reset() sees the new conversation without awaiting this.
     * @returns {Promise<void>}
     */
    reset(): Promise<void>;
    /**
     * Free the model's GPU memory and files in the worker; a generation in flight stops first.
     * @returns {Promise<void>}
     */
    dispose(): Promise<void>;
    #private;
}
/**
 * a piece of the answer
 */
export type TextEvent = {
    type: "text";
    text: string;
};
/**
 * the end of a turn
 */
export type DoneEvent = {
    type: "done";
    /**
     * generated ids
     */
    tokenIds: number[];
    /**
     * the whole answer
     */
    text: string;
    /**
     * positions of the conversation's prompt
     */
    promptRows: number;
    /**
     * positions kept in the KV cache from earlier turns
     */
    reusedRows: number;
    /**
     * prompt positions fed through the decoder
     */
    computedRows: number;
    /**
     * the prompt's decoder windows
     */
    prefillWindows: number;
    /**
     * of them, those computed (fewer when aborted during prefill)
     */
    prefillWindowsRun: number;
    /**
     * GPU submits they took (sized so an abort is seen about every 0.25 s)
     */
    prefillSubmits: number;
    newTokens: number;
    prefillTokensPerSecond: number;
    decodeTokensPerSecond: number;
    prefillSeconds: number;
    decodeSeconds: number;
    visionSeconds: number;
    /**
     * of decodeSeconds, in the Python sampler
     */
    samplingSeconds: number;
    stopReason: "stop_token" | "stop_sequence" | "max_new_tokens" | "context_full" | "aborted";
};
export type GenerateEvent = TextEvent | DoneEvent;
/**
 * what `checkCapabilities` finds
 */
export type Capabilities = {
    webgpu: boolean;
    adapter: {
        vendor: string;
        architecture: string;
        device: string;
        description: string;
        isFallbackAdapter: boolean;
    } | null;
    limits: Record<string, number>;
    features: string[];
    wgslFeatures: string[];
    /**
     * why models cannot run here (empty: they can)
     */
    problems: string[];
    /**
     * what will be slow or not kept
     */
    warnings: string[];
};
import { Completions } from './chat.js';
