// What the page says about an error: a title, the error's own message, and what to do.
// Errors are matched by name (webpte's typed errors set `name` to their class name, also
// across the worker boundary), so this module needs no import of the library.

const ADVICE = {
  NoWebGPUError: {
    title: 'WebGPU is not available in this browser',
    todo: 'Open this page in a browser with WebGPU: Chrome or Edge 113 or newer on Windows, macOS '
      + 'or ChromeOS, Chrome 121+ on Android, Safari 26 or Firefox 141 on Windows. On Linux start '
      + 'Chrome with --enable-unsafe-webgpu (or turn on chrome://flags/#enable-unsafe-webgpu). '
      + 'Nothing was downloaded.',
  },
  AdapterLimitsError: {
    title: 'Your GPU adapter is too small for this model',
    todo: 'Try the smaller bundled model, another browser, or a machine with a bigger GPU.',
  },
  DeviceLostError: {
    title: 'The GPU device was lost',
    todo: 'The driver reset or ran out of memory (other tabs count too). Close other GPU-heavy '
      + 'tabs and load the model again.',
  },
  AdapterError: {
    title: 'No usable GPU device',
    todo: 'Update the browser and the graphics driver, or try another browser.',
  },
  HashMismatchError: {
    title: 'A model file does not match its pinned checksum',
    todo: 'The file was corrupted in transit or the source serves different files from the '
      + 'published ones, so it was not used. Load again to download it afresh; if it keeps '
      + 'failing, pick another model source.',
  },
  PteFormatError: {
    title: 'A model file is not a valid ExecuTorch program',
    todo: 'The .pte file is truncated or is not an ExecuTorch WebGPU export. Download it again '
      + 'or pick the complete model folder.',
  },
  ModelFolderError: {
    title: 'The model folder is not complete',
    todo: 'Pick the whole model folder (with its tokenizer/ folder and webpte_model.json or the '
      + 'published SmolVLM files), or download the missing files again.',
  },
  TemplateError: {
    title: 'The model\'s chat template could not be used',
    todo: 'The tokenizer_config.json of the model folder holds a template webpte cannot render; '
      + 'use the published tokenizer files.',
  },
  UnsupportedOpError: {
    title: 'The program uses operations webpte cannot run',
    todo: 'Export the model with ExecuTorch\'s WebGPU partitioner and the SmolVLM op set, or '
      + 'use one of the listed models.',
  },
  PlanError: {
    title: 'The program could not be prepared for this GPU',
    todo: 'Reload the page and try again; if it persists, report it with the browser and model.',
  },
  ContextFullError: {
    title: 'The conversation is full',
    todo: 'The model\'s context has no room left. Press "New conversation" to start again.',
  },
  QuotaError: {
    title: 'Not enough storage for the model files',
    todo: 'The browser refused to keep the downloaded files. Free disk space or allow this site '
      + 'more storage in the site settings, then load again.',
  },
  InputError: {
    title: 'The input was not accepted',
    todo: 'Check the model source (URL reachable, folder complete) and the question or image.',
  },
  DisposedError: {
    title: 'The model was unloaded',
    todo: 'Load the model again.',
  },
  WorkerError: {
    title: 'The webpte worker could not run',
    todo: 'Serve every file of the site (the whole dist/ folder) and reload the page.',
  },
  WebpteError: {
    title: 'webpte could not do that',
    todo: 'Reload the page and try again.',
  },
};

const GENERIC = {
  title: 'Something went wrong',
  todo: 'Reload the page and try again; if it happens again, report it with the browser '
    + 'console output.',
};

/**
 * The page's account of an error: `{name, title, message, todo}`.
 * @param {unknown} err
 */
export function describeError(err) {
  const name = err?.name ?? 'Error';
  const advice = ADVICE[name] ?? GENERIC;
  let message = String(err?.message ?? err ?? '');
  if (name === 'AdapterLimitsError' && err.limit && !message.includes(err.limit)) {
    message += ` (${err.limit}: needs ${err.needed}, the adapter allows ${err.allowed})`;
  }
  if (name === 'ModelFolderError' && err.problems?.length && !message.includes(err.problems[0])) {
    message += `: ${err.problems.join('; ')}`;
  }
  if (name === 'UnsupportedOpError' && err.ops?.length && !message.includes(err.ops[0])) {
    message += ` (${err.ops.join(', ')})`;
  }
  return { name, title: advice.title, message, todo: advice.todo };
}

/**
 * The page's account of a capability check that found models cannot run here (same shape as
 * describeError): no WebGPU, or something else missing (`caps.problems` says what).
 * @param {{webgpu: boolean, problems?: string[]}} caps
 */
export function describeCapabilities(caps) {
  const problems = caps.problems ?? [];
  if (!caps.webgpu) {
    const { title, todo } = ADVICE.NoWebGPUError;
    return { name: 'NoWebGPUError', title, message: problems.join('; ') || 'navigator.gpu gives no adapter', todo };
  }
  return {
    name: 'CapabilityError',
    title: 'This browser cannot run the models here',
    message: problems.join('; '),
    todo: 'Open the page over https (or from localhost) in an up-to-date Chrome, Edge, Safari or '
      + 'Firefox. Nothing was downloaded.',
  };
}
