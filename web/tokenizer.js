// Tokenization in the worker with @huggingface/tokenizers (tokenizers.js) on the model's
// tokenizer.json, giving the ids of the Rust `tokenizers` the native host uses.
//
// Where tokenizers.js differs from Rust: its ByteLevel pre-tokenizer splits with a JS RegExp
// whose `\s` is JavaScript's (it has U+FEFF, lacks U+0085); Rust compiles the same pattern with
// Oniguruma (`\s` = \t-\r, U+0085, Z*). The pattern is re-expressed as a `Split` with
// Oniguruma's whitespace class written out, followed by ByteLevel without its regex.
// tests/js/tokenizer.test.mjs checks ids and decoded text against Python goldens.

const S = '[\\t-\\r\\x85\\p{Z}]'; // Oniguruma's Unicode \s
const NOT_S = '[^\\t-\\r\\x85\\p{Z}]';
/** Rust's ByteLevel split pattern (GPT-2), with `\s` / `\S` written as Oniguruma reads them. */
export const BYTE_LEVEL_SPLIT = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\t-\\r\\x85\\p{Z}\\p{L}\\p{N}]+"
  + `|${S}+(?!${NOT_S})|${S}+`;

function rewrite(pre) {
  if (pre?.type === 'Sequence') {
    return { ...pre, pretokenizers: pre.pretokenizers.flatMap((p) => {
      const r = rewrite(p);
      return r.type === 'Sequence' && p.type !== 'Sequence' ? r.pretokenizers : [r];
    }) };
  }
  if (pre?.type === 'ByteLevel' && (pre.use_regex ?? true) && !pre.add_prefix_space) {
    return { type: 'Sequence', pretokenizers: [
      { type: 'Split', pattern: { Regex: BYTE_LEVEL_SPLIT }, behavior: 'Isolated', invert: false },
      { ...pre, use_regex: false },
    ] };
  }
  return pre;
}

/**
 * tokenizer.json with every regex ByteLevel pre-tokenizer re-expressed as a Split (the Rust
 * pattern) + ByteLevel without regex, so tokenizers.js gives the Rust ids. Not modified in place.
 * @param {object} json parsed tokenizer.json
 * @returns {object}
 */
export function compatTokenizerJSON(json) {
  if (!json?.pre_tokenizer) return json;
  return { ...json, pre_tokenizer: rewrite(json.pre_tokenizer) };
}

/** A model's tokenizer: encode/decode as the native host does (no special tokens added). */
export class TextTokenizer {
  /**
   * @param {new (json: object, config: object) => any} Tokenizer the tokenizers.js class
   * @param {object} json parsed tokenizer.json @param {object} config parsed tokenizer_config.json
   */
  constructor(Tokenizer, json, config) {
    this.inner = new Tokenizer(compatTokenizerJSON(json), config);
  }

  /** @param {string} text @returns {number[]} */
  encode(text) {
    return this.inner.encode(text, { add_special_tokens: false }).ids;
  }

  /** Text of `ids`, special tokens kept, no clean-up (Rust `decode`). @param {number[]} ids */
  decode(ids) {
    if (!ids.length) return '';
    return this.inner.decode(ids, { skip_special_tokens: false, clean_up_tokenization_spaces: false });
  }

  /** Id of a token, or -1. @param {string} token */
  tokenId(token) {
    return this.inner.token_to_id(token) ?? -1;
  }
}

/**
 * Text pieces of a growing token list as they become final: a piece ending in an incomplete
 * UTF-8 sequence (U+FFFD) is held back until the next token completes it (like Session).
 */
export class TextStream {
  /** @param {TextTokenizer} tokenizer */
  constructor(tokenizer) {
    this.tokenizer = tokenizer;
    this.ids = [];
    this.emitted = '';
  }

  /** Add a token; returns the new text (possibly ''). @param {number} id */
  push(id) {
    this.ids.push(id);
    const text = this.tokenizer.decode(this.ids);
    if (text.endsWith('\ufffd')) return '';
    const piece = text.slice(this.emitted.length);
    this.emitted = text;
    return piece;
  }

  /** Everything decoded so far. */
  get text() {
    return this.tokenizer.decode(this.ids);
  }
}
