/**
 * Check that `msg` is a well-formed message; returns it or throws a TypeError.
 * @param {any} msg
 * @param {readonly string[]} kinds allowed kinds
 */
export function checkMessage(msg: any, kinds: readonly string[]): any;
/**
 * The worker side: answer requests on `port` with `handlers[kind](content, emit)`.
 * Requests are served one at a time in arrival order (a run never overlaps a load), except
 * `cancel`, answered at once. A handler may return a `Transfer` to move buffers instead of
 * copying them; `emit(content)` sends a stream event for the request being served; `signal`
 * aborts when the page cancels the request.
 * @param {{postMessage: Function, addEventListener: Function}} port
 * @param {Record<string, (content: any, emit: (c: any) => void, signal: AbortSignal) => any>} handlers
 */
export function serve(port: {
    postMessage: Function;
    addEventListener: Function;
}, handlers: Record<string, (content: any, emit: (c: any) => void, signal: AbortSignal) => any>): void;
/** Kinds of request the worker serves. */
export const REQUESTS: readonly string[];
/** Kinds of message the worker sends back. */
export const REPLIES: readonly string[];
/**
 * A value to return together with the objects to transfer (not copy) to the other side.
 */
export class Transfer {
    /** @param {unknown} value @param {Transferable[]} list */
    constructor(value: unknown, list: Transferable[]);
    value: unknown;
    list: Transferable[];
}
/**
 * The page side: sends requests over a port (a Worker or MessagePort) and resolves each
 * with its `return`, rejects with the typed error of its `throw`.
 */
export class Client {
    /** @param {{postMessage: Function, addEventListener: Function, terminate?: Function}} port */
    constructor(port: {
        postMessage: Function;
        addEventListener: Function;
        terminate?: Function;
    });
    port: {
        postMessage: Function;
        addEventListener: Function;
        terminate?: Function;
    };
    nextId: number;
    /** @type {Map<number, {resolve: Function, reject: Function, onEvent?: Function}>} */
    pending: Map<number, {
        resolve: Function;
        reject: Function;
        onEvent?: Function;
    }>;
    failure: any;
    /**
     * Send one request.
     * @param {string} kind one of REQUESTS
     * @param {unknown} content
     * @param {{transfer?: Transferable[], onEvent?: (content: any) => void, signal?: AbortSignal}} [options]
     *   `signal`: when it aborts, the worker is asked to cancel this request (the handler decides
     *   what that means; e.g. generation stops and returns what it has)
     * @returns {Promise<any>}
     */
    request(kind: string, content: unknown, { transfer, onEvent, signal }?: {
        transfer?: Transferable[];
        onEvent?: (content: any) => void;
        signal?: AbortSignal;
    }): Promise<any>;
    /** Reject every pending and future request with `err` (worker gone). */
    fail(err: any): void;
    /** Terminate the worker; pending requests reject with DisposedError. */
    close(): void;
    #private;
}
