/**
 * Check an OpenAI-style request and shape it for the worker. Fields webpte has no meaning for
 * (tools, logit_bias, n > 1, ...) are refused with an InputError naming them.
 * @param {any} body
 * @param {{hasVision?: boolean}} [model]
 * @returns {{history: {role: string, text: string, image: string | null}[], prompt: string,
 *   image: string | null, options: {maxNewTokens?: number, temperature?: number, topP?: number,
 *   topK?: number, repetitionPenalty?: number, seed?: number | null}, stop: string[],
 *   stream: boolean, includeUsage: boolean}}
 * @throws {InputError}
 */
export function chatRequest(body: any, { hasVision }?: {
    hasVision?: boolean;
}): {
    history: {
        role: string;
        text: string;
        image: string | null;
    }[];
    prompt: string;
    image: string | null;
    options: {
        maxNewTokens?: number;
        temperature?: number;
        topP?: number;
        topK?: number;
        repetitionPenalty?: number;
        seed?: number | null;
    };
    stop: string[];
    stream: boolean;
    includeUsage: boolean;
};
/** OpenAI's finish_reason of a webpte stop reason. @param {string} stopReason */
export function finishReason(stopReason: string): "stop" | "abort" | "length";
/** `usage` of a done event. @param {{promptRows: number, newTokens: number}} done */
export function usage(done: {
    promptRows: number;
    newTokens: number;
}): {
    prompt_tokens: number;
    completion_tokens: number;
    total_tokens: number;
};
/**
 * Text held back while it may be the start of a stop sequence; `push` gives what is final.
 */
export class StopText {
    /** @param {string[]} stops */
    constructor(stops: string[]);
    stops: string[];
    pending: string;
    /** Everything released so far (the answer when a stop sequence ended it). */
    text: string;
    stopped: boolean;
    /** Add decoded text; returns the part that is final ('' while held back or after a stop). @param {string} piece */
    push(piece: string): any;
    /** The end of the answer: release what was held back. */
    flush(): any;
    #private;
}
/** `model.chat.completions`: made by Model; `run(content, {signal})` streams the worker's events. */
export class Completions {
    /**
     * @param {{name: string, hasVision: boolean}} model
     * @param {(request: object, options: {signal?: AbortSignal}) => AsyncGenerator<any>} run
     */
    constructor(model: {
        name: string;
        hasVision: boolean;
    }, run: (request: object, options: {
        signal?: AbortSignal;
    }) => AsyncGenerator<any>);
    /** @private */
    private model;
    /** @private */
    private run;
    /**
     * Answer the conversation `body.messages` (OpenAI's chat completion request). With
     * `stream: true` resolves to an async iterable of `chat.completion.chunk` objects (the last
     * one has `finish_reason` and `usage`); otherwise to one `chat.completion`. Leaving the
     * stream's loop early stops the generation.
     * @param {ChatCompletionRequest} body
     * @param {{signal?: AbortSignal}} [options] `signal` stops the generation (finish_reason 'abort')
     * @returns {Promise<any>} a ChatCompletion, or an AsyncIterable of ChatCompletionChunk when streaming
     * @throws {InputError | ContextFullError | TemplateError | DisposedError}
     */
    create(body: ChatCompletionRequest, { signal }?: {
        signal?: AbortSignal;
    }): Promise<any>;
}
export type ChatMessage = {
    role: "system" | "user" | "assistant";
    content: string | ({
        type: "text";
        text: string;
    } | {
        type: "image_url";
        image_url: {
            url: string;
            detail?: "auto";
        };
    })[];
};
export type ChatCompletionRequest = {
    /**
     * the whole conversation, ending with the user's message
     */
    messages: ChatMessage[];
    /**
     * ignored (the request goes to this model)
     */
    model?: string;
    stream?: boolean;
    /**
     * usage is in the last chunk unless false
     */
    stream_options?: {
        include_usage?: boolean;
    };
    /**
     * default 256
     */
    max_tokens?: number;
    /**
     * same as max_tokens
     */
    max_completion_tokens?: number;
    /**
     * 0 (default) is greedy
     */
    temperature?: number;
    top_p?: number;
    /**
     * webpte's: 0 (default) is no limit
     */
    top_k?: number;
    /**
     * webpte's: a multiplier as in transformers (1: none)
     */
    repetition_penalty?: number;
    seed?: number;
    /**
     * up to 4 sequences that end the answer (not included)
     */
    stop?: string | string[];
    n?: 1;
    /**
     * ignored
     */
    user?: string;
};
