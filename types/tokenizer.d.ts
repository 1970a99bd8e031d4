/**
 * tokenizer.json with every regex ByteLevel pre-tokenizer re-expressed as a Split (the Rust
 * pattern) + ByteLevel without regex, so tokenizers.js gives the Rust ids. Not modified in place.
 * @param {object} json parsed tokenizer.json
 * @returns {object}
 */
export function compatTokenizerJSON(json: object): object;
/** Rust's ByteLevel split pattern (GPT-2), with `\s` / `\S` written as Oniguruma reads them. */
export const BYTE_LEVEL_SPLIT: string;
/** A model's tokenizer: encode/decode as the native host does (no special tokens added). */
export class TextTokenizer {
    /**
     * @param {new (json: object, config: object) => any} Tokenizer the tokenizers.js class
     * @param {object} json parsed tokenizer.json @param {object} config parsed tokenizer_config.json
     */
    constructor(Tokenizer: new (json: object, config: object) => any, json: object, config: object);
    inner: any;
    /** @param {string} text @returns {number[]} */
    encode(text: string): number[];
    /** Text of `ids`, special tokens kept, no clean-up (Rust `decode`). @param {number[]} ids */
    decode(ids: number[]): any;
    /** Id of a token, or -1. @param {string} token */
    tokenId(token: string): any;
}
/**
 * Text pieces of a growing token list as they become final: a piece ending in an incomplete
 * UTF-8 sequence (U+FFFD) is held back until the next token completes it (like Session).
 */
export class TextStream {
    /** @param {TextTokenizer} tokenizer */
    constructor(tokenizer: TextTokenizer);
    tokenizer: TextTokenizer;
    ids: any[];
    emitted: string;
    /** Add a token; returns the new text (possibly ''). @param {number} id */
    push(id: number): any;
    /** Everything decoded so far. */
    get text(): any;
}
