// The demo page: check the browser, load a model, ask questions about a picture.
// Model output is only ever set as textContent.

import { checkCapabilities, deleteModelFromCache, listCachedModels, loadModel } from '../index.js';
import { describeCapabilityCheck } from './capabilities.js';
import { describeCachedModel, describeDone, describeProgress, formatBytes, formatRate } from './format.js';
import { describeCapabilities, describeError } from './messages.js';
import { Picture } from './picture.js';
import { BUNDLED_URL, HUB_URL, bundledMeta, describeFolder, droppedFiles } from './sources.js';

const $ = (id) => document.getElementById(id);

const state = {
  model: null,
  info: null, // {name, vision, maxContext} of the loaded model
  bundled: null, // webpte_model.json of the bundled model, null when absent
  folder: null, // describeFolder() of the picked folder
  controller: null, // AbortController of the running generation
  generation: null, // Promise of the running generation
  loading: false,
  objectURLs: [],
};

const picture = new Picture({
  drop: $('picture-drop'), input: $('picture-input'), preview: $('picture-preview'),
  clear: $('picture-clear'), cameraOpen: $('camera-open'), camera: $('camera'),
  video: $('camera-video'), snap: $('camera-snap'), cancel: $('camera-cancel'),
}, (err) => showError(err, $('chat')));

// ---- errors ---------------------------------------------------------------------------

function showDescription({ name, title, message, todo }, section) {
  const box = $('error');
  box.dataset.error = name;
  $('error-title').textContent = title;
  $('error-message').textContent = message;
  $('error-todo').textContent = todo;
  section.append(box);
  box.hidden = false;
}

function showError(err, section) {
  console.error(err);
  showDescription(describeError(err), section);
}

function clearError() {
  $('error').hidden = true;
}

// ---- 1: capabilities ------------------------------------------------------------------

function facts(list, pairs) {
  for (const [term, value] of pairs) {
    const dt = document.createElement('dt');
    const dd = document.createElement('dd');
    dt.textContent = term;
    dd.textContent = value;
    list.append(dt, dd);
  }
}

async function checkBrowser() {
  let caps;
  try {
    caps = await checkCapabilities();
  } catch (err) {
    $('caps-status').textContent = 'The capability check failed.';
    showError(err, $('caps'));
    return false;
  }
  const check = describeCapabilityCheck(caps);
  $('caps-status').textContent = check.status;
  $('caps-status').className = `status ${check.tone}`;
  if (!check.ok) {
    showDescription(describeCapabilities(caps), $('caps'));
    return false;
  }
  facts($('caps-details'), check.facts);
  facts($('caps-all'), check.all);
  $('caps-details').hidden = false;
  $('caps-more').hidden = false;
  for (const w of check.warnings) {
    const li = document.createElement('li');
    li.textContent = w;
    $('caps-warnings').append(li);
  }
  $('caps-warnings').hidden = !check.warnings.length;
  return true;
}

// ---- 2: model -------------------------------------------------------------------------

function sourceChoice() {
  return document.querySelector('input[name=source]:checked').value;
}

function updateSourceUI() {
  const choice = sourceChoice();
  for (const el of document.querySelectorAll('.choice-extra')) el.hidden = el.dataset.for !== choice;
  const ready = choice === 'bundled' ? !!state.bundled
    : choice === 'folder' ? !!state.folder && !state.folder.problem
      : /^https?:\/\//.test($('hub-url').value.trim());
  $('load').disabled = state.loading || !ready;
}

async function setFolder(files) {
  state.folder = files.length ? await describeFolder(files) : null;
  const f = state.folder;
  const summary = $('folder-summary');
  if (!f) summary.textContent = 'That folder is empty.';
  else if (f.problem) summary.textContent = `${f.folder} is not a model folder: ${f.problem}.`;
  else {
    summary.textContent = `${f.folder}: ${f.name}, ${f.files.length} files, ${formatBytes(f.bytes)}, `
      + (f.vision ? 'pictures and text' : 'text only');
  }
  summary.className = `status ${!f || f.problem ? 'bad' : 'good'}`;
  updateSourceUI();
}

/** The loadModel source and the model's name as the page knows it ahead of loading. */
function chosenSource() {
  const choice = sourceChoice();
  if (choice === 'bundled') {
    return { source: new URL(BUNDLED_URL, location.href).href, name: state.bundled.name ?? 'SmolLM2' };
  }
  if (choice === 'folder') return { source: { files: state.folder.files }, name: state.folder.name };
  return { source: $('hub-url').value.trim(), name: 'The model at that URL' };
}

function showProgress(ev) {
  const { label, detail, fraction } = describeProgress(ev);
  $('progress-label').textContent = label;
  $('progress-detail').textContent = detail;
  const bar = $('progress-bar');
  if (fraction == null) bar.removeAttribute('value');
  else bar.value = fraction;
}

async function unloadModel() {
  const model = state.model;
  state.model = null;
  if (!model) return;
  state.controller?.abort();
  await state.generation;
  try {
    await model.dispose();
  } catch (err) {
    console.warn('dispose failed', err);
  }
}

async function load() {
  const { source, name } = chosenSource();
  clearError();
  state.loading = true;
  $('sources').disabled = true;
  updateSourceUI();
  $('chat').hidden = true;
  $('model-status').textContent = '';
  $('model-status').className = 'status';
  await unloadModel();
  clearConversation();
  showProgress({ stage: 'fetch' });
  $('progress').hidden = false;
  const t0 = performance.now();
  try {
    const model = state.model = await loadModel(source, { onProgress: showProgress });
    state.info = { name: model.name, vision: model.hasVision, maxContext: model.maxContext };
    const seconds = ((performance.now() - t0) / 1000).toFixed(1);
    $('model-status').textContent = `✓ ${state.info.name} is ready (loaded in ${seconds} s).`;
    $('model-status').className = 'status good';
    showChat();
  } catch (err) {
    $('model-status').textContent = `✗ ${name} could not be loaded.`;
    $('model-status').className = 'status bad';
    showError(err, $('model'));
  } finally {
    state.loading = false;
    $('progress').hidden = true;
    $('sources').disabled = false;
    updateSourceUI();
    $('stored-status').textContent = '';
    await showStored();
  }
}

/** List the model folders kept in Cache Storage, each with a Delete button. */
async function showStored() {
  let models = [];
  try {
    models = await listCachedModels();
  } catch (err) {
    console.warn('the model cache could not be listed', err);
  }
  const list = $('stored-list');
  list.replaceChildren(...models.map((m) => {
    const { title, detail } = describeCachedModel(m);
    const li = document.createElement('li');
    li.dataset.base = m.base;
    const name = document.createElement('strong');
    name.textContent = title;
    const small = document.createElement('small');
    small.textContent = detail;
    const del = document.createElement('button');
    del.type = 'button';
    del.className = 'small';
    del.textContent = 'Delete';
    del.addEventListener('click', () => deleteStored(m.base, title));
    li.append(name, ' ', small, ' ', del);
    return li;
  }));
  $('stored').hidden = models.length === 0 && !$('stored-status').textContent;
}

async function deleteStored(base, title) {
  try {
    const { files, bytes } = await deleteModelFromCache(base);
    $('stored-status').textContent = `Deleted ${title}: ${formatBytes(bytes)} in ${files} file${files === 1 ? '' : 's'}.`;
  } catch (err) {
    showError(err, $('model'));
  }
  await showStored();
}

// ---- 3: conversation ------------------------------------------------------------------

function showChat() {
  const { vision } = state.info;
  $('picture-controls').hidden = !vision;
  $('chat-h').lastChild.textContent = vision ? ' Ask about a picture' : ' Ask';
  $('question').placeholder = vision
    ? 'Ask about the picture, e.g. "What animal is this?"'
    : 'Ask a question, e.g. "What is the capital of France?"';
  $('chat').hidden = false;
  $('question').focus();
}

function number(id) {
  const x = Number($(id).value);
  return Number.isFinite(x) ? x : undefined;
}

/** Sampling options of the form; the model's defaults stand for the neutral values. */
function sampling() {
  const out = { maxNewTokens: number('max-new-tokens'), temperature: number('temperature') ?? 0 };
  if (out.temperature > 0) {
    const topK = number('top-k');
    const topP = number('top-p');
    if (topK > 0) out.topK = topK;
    if (topP > 0 && topP < 1) out.topP = topP;
    out.seed = number('seed');
  }
  const penalty = number('repetition-penalty');
  if (penalty && penalty !== 1) out.repetitionPenalty = penalty;
  return out;
}

function addTurn(prompt, image) {
  const user = document.createElement('li');
  user.className = 'turn user';
  if (image) {
    const img = document.createElement('img');
    const url = URL.createObjectURL(image);
    state.objectURLs.push(url);
    img.src = url;
    img.alt = 'the picture asked about';
    img.className = 'thumb';
    user.append(img);
  }
  const q = document.createElement('p');
  q.className = 'text';
  q.textContent = prompt;
  user.append(q);
  const answer = document.createElement('li');
  answer.className = 'turn assistant streaming';
  const text = document.createElement('p');
  text.className = 'text';
  const meta = document.createElement('p');
  meta.className = 'meta';
  answer.append(text, meta);
  $('transcript').append(user, answer);
  return { answer, text, meta };
}

function showStats(done) {
  $('stat-prefill').textContent = `${formatRate(done.prefillTokensPerSecond)} tok/s `
    + `(${done.computedRows} rows computed, ${done.reusedRows} reused)`;
  $('stat-decode').textContent = `${formatRate(done.decodeTokensPerSecond)} tok/s (${done.newTokens} tokens)`;
  const used = done.promptRows + done.newTokens;
  const max = state.info.maxContext;
  $('stat-context').textContent = max ? `${used} of ${max} positions used` : `${used} positions used`;
  $('stats').hidden = false;
}

function setGenerating(on) {
  $('ask').disabled = on;
  $('stop').disabled = !on;
  if (on) $('load').disabled = true;
  else updateSourceUI();
  $('chat').classList.toggle('generating', on);
}

async function generate(prompt, image) {
  const turn = addTurn(prompt, image);
  const controller = state.controller = new AbortController();
  setGenerating(true);
  let done = null;
  try {
    const events = state.model.generate({ prompt, image, ...sampling(), signal: controller.signal });
    for await (const ev of events) {
      if (ev.type === 'text') turn.text.textContent += ev.text;
      else if (ev.type === 'done') done = ev;
    }
  } catch (err) {
    turn.answer.classList.add('failed');
    showError(err, $('chat'));
  } finally {
    state.controller = null;
    turn.answer.classList.remove('streaming');
    setGenerating(false);
  }
  if (done) {
    turn.meta.textContent = describeDone(done);
    showStats(done);
  }
  if (!turn.text.textContent) turn.text.textContent = '…';
}

function ask(e) {
  e.preventDefault();
  const prompt = $('question').value.trim();
  if (!prompt || !state.model || state.generation) return;
  clearError();
  const image = state.info.vision ? picture.take() : null;
  $('question').value = '';
  state.generation = generate(prompt, image).finally(() => {
    state.generation = null;
    $('question').focus();
  });
}

function clearConversation() {
  $('transcript').replaceChildren();
  for (const url of state.objectURLs) URL.revokeObjectURL(url);
  state.objectURLs = [];
  $('stats').hidden = true;
}

async function newConversation() {
  state.controller?.abort();
  await state.generation;
  clearError();
  clearConversation();
  try {
    await state.model?.reset();
  } catch (err) {
    showError(err, $('chat'));
  }
  $('question').focus();
}

// ---- wiring ---------------------------------------------------------------------------

function wire() {
  $('hub-url').value = HUB_URL;
  for (const radio of document.querySelectorAll('input[name=source]')) {
    radio.addEventListener('change', updateSourceUI);
  }
  $('hub-url').addEventListener('input', updateSourceUI);
  $('folder-input').addEventListener('change', () => setFolder([...$('folder-input').files]));
  const drop = $('folder-drop');
  drop.addEventListener('dragover', (e) => {
    e.preventDefault();
    drop.classList.add('over');
  });
  drop.addEventListener('dragleave', () => drop.classList.remove('over'));
  drop.addEventListener('drop', (e) => {
    e.preventDefault();
    drop.classList.remove('over');
    document.querySelector('input[name=source][value=folder]').checked = true;
    droppedFiles(e.dataTransfer).then(setFolder, (err) => showError(err, $('model')));
  });
  // A file dropped anywhere else must not navigate away from the conversation.
  window.addEventListener('dragover', (e) => e.preventDefault());
  window.addEventListener('drop', (e) => e.preventDefault());
  window.addEventListener('paste', (e) => {
    const file = [...(e.clipboardData?.files ?? [])].find((f) => f.type.startsWith('image/'));
    if (file && state.info?.vision) picture.set(file);
  });
  $('load').addEventListener('click', load);
  $('ask-form').addEventListener('submit', ask);
  $('question').addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey) {
      e.preventDefault();
      $('ask-form').requestSubmit();
    }
  });
  $('stop').addEventListener('click', () => state.controller?.abort());
  $('new-conversation').addEventListener('click', newConversation);
}

async function main() {
  wire();
  if ('serviceWorker' in navigator) {
    navigator.serviceWorker.register(new URL('../sw.js', import.meta.url)).catch((err) => {
      console.warn(`offline use is off: the service worker did not register (${err.message})`);
    });
  }
  if (!(await checkBrowser())) {
    document.body.dataset.state = 'no-webgpu';
    return;
  }
  state.bundled = await bundledMeta();
  if (state.bundled) {
    $('bundled-name').textContent = state.bundled.name ?? 'SmolLM2';
    $('bundled-note').textContent = state.bundled.vision != null
      ? 'pictures and text, served with this page' : 'text only, served with this page';
  } else {
    $('choice-bundled').classList.add('unavailable');
    $('bundled-note').textContent = 'not published with this copy of the page';
    $('choice-bundled').querySelector('input').disabled = true;
    document.querySelector('input[name=source][value=hub]').checked = true;
  }
  $('sources').disabled = false;
  updateSourceUI();
  await showStored();
  document.body.dataset.state = 'ready';
}

main();
