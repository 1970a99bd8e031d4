/**
 * Check what the plan of the program at `url` needs against the device before the file is
 * downloaded. A file in the Cache API (`cache`) is not downloaded, so it is not preflighted
 * (the load plans it once). Returns `{needs, fetched, reads, bytes_read, file_size, plan_ms}`,
 * or `{skipped}` when there is nothing to download or the ranges could not be read (the
 * download then goes ahead; the load checks the limits).
 * @param {string} url
 * @param {{glue: any, method?: string, fusion?: string, features?: string[], cache?: boolean,
 *   limits?: Record<string, number> | null, data?: string[]}} options `limits` caps the device's limits
 *   (WebGPU names; `deviceMemory`: a byte budget for the plan's buffers, which WebGPU does not report);
 *   `data`: the URLs of the program's external data files (`.ptd`), read by ranges too
 * @returns {Promise<object>}
 * @throws {AdapterLimitsError} the plan needs more than the device (or `limits`) allows
 * @throws {WebpteError} the program cannot be planned (read from the server's bytes)
 */
export function preflightProgram(url: string, { glue, method, fusion, features, cache, limits, data }: {
    glue: any;
    method?: string;
    fusion?: string;
    features?: string[];
    cache?: boolean;
    limits?: Record<string, number> | null;
    data?: string[];
}): Promise<object>;
/**
 * Preflight the programs (decoder, vision) of a model folder at a URL before any of its files
 * is downloaded: `{[role]: preflightProgram's answer}`; a local folder has nothing to download.
 * @param {import('./files.js').UrlFolder | LocalFolder} folder
 * @param {{files: {name: string, role: string}[]}} manifest web_glue.model_manifest's answer
 * @param {{glue: any, fusion?: string, cache?: boolean, limits?: Record<string, number> | null}} options
 * @throws {AdapterLimitsError | WebpteError}
 */
export function preflightModel(folder: import("./files.js").UrlFolder | LocalFolder, manifest: {
    files: {
        name: string;
        role: string;
    }[];
}, { glue, fusion, cache, limits }: {
    glue: any;
    fusion?: string;
    cache?: boolean;
    limits?: Record<string, number> | null;
}): Promise<{}>;
/**
 * The files of a preflighted program as streamed sources (web/sources.js), each checked
 * against the ranges the plan was read from as its chunks pass, and the preflight's plan;
 * null when the preflight made none. The plan is taken out of `preflighted`.
 * @param {object | null} preflighted preflightProgram's answer
 * @param {string} url @param {string[]} data the data files' URLs, in the preflight's order
 * @param {{chunkBytes?: number}} [options] bytes a Range request reads
 * @returns {{files: CheckedFile[], planned: object} | null}
 */
export function streamPlanned(preflighted: object | null, url: string, data?: string[], { chunkBytes }?: {
    chunkBytes?: number;
}): {
    files: CheckedFile[];
    planned: object;
} | null;
/**
 * The plan a preflight made, for the downloaded `bytes` of the same file (the same size, and
 * the same bytes wherever Python read ranges), so the load does not plan the program again;
 * null when there is none or the file differs. It is taken out of `preflighted` (stats keep
 * the figures, not the plan).
 * @param {object | null} preflighted preflightProgram's answer
 * @param {ArrayBuffer} bytes
 * @param {ArrayBuffer[]} [data] the downloaded external data files, in the preflight's order
 * @returns {{plan: string, position_input: number[] | null, dynamic: boolean, plan_ms: number,
 *   plan_total_ms: number, bytes_read: number} | null}
 */
export function takePlan(preflighted: object | null, bytes: ArrayBuffer, data?: ArrayBuffer[]): {
    plan: string;
    position_input: number[] | null;
    dynamic: boolean;
    plan_ms: number;
    plan_total_ms: number;
    bytes_read: number;
} | null;
import { LocalFolder } from './files.js';
import { CheckedFile } from './sources.js';
