// A chat app on webpte: load a model folder, stream answers with OpenAI's chat API, attach a
// picture for a vision model, stop an answer, start over.
import { checkCapabilities, ContextFullError, loadModel } from 'webpte';

const $ = (id) => document.getElementById(id);
// A model folder's URL: ?model=... or /models/smollm2/ (put folders under public/models/).
$('model-url').value = new URLSearchParams(location.search).get('model') ?? '/models/smollm2/';

let model = null;
let messages = [];       // the whole conversation; webpte reuses the KV cache of its prefix
let picture = null;      // a data: URL, sent with the next question
let answering = null;    // the AbortController of the answer being streamed

function setBusy(busy) {
  $('send').disabled = busy;
  $('stop').disabled = !busy;
  $('question').disabled = busy;
  $('picture').disabled = busy || !model.hasVision;
  $('new-chat').disabled = busy;
}

function addTurn(role, text, image = null) {
  const li = Object.assign(document.createElement('li'), { className: role });
  if (image) li.append(Object.assign(document.createElement('img'), { src: image, alt: 'the picture' }));
  const p = Object.assign(document.createElement('span'), { textContent: text });
  li.append(p);
  $('log').append(li);
  return p;
}

$('load-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  const caps = await checkCapabilities();
  if (caps.problems.length) {
    $('status').textContent = caps.problems.join(' ');
    return;
  }
  $('load').disabled = true;
  $('progress').hidden = false;
  try {
    model = await loadModel($('model-url').value, {
      onProgress: (e) => {
        if (e.total) $('progress').value = e.loaded / e.total;
        $('status').textContent = `Loading: ${e.stage}${e.etaSeconds ? `, about ${Math.ceil(e.etaSeconds)} s left` : ''}`;
      },
    });
    $('status').textContent = `${model.name} is ready${model.hasVision ? '; it can look at a picture' : ''}.`;
    setBusy(false);
    $('question').focus();
  } catch (err) {
    $('status').textContent = `${err.name}: ${err.message}`;
    $('load').disabled = false;
  } finally {
    $('progress').hidden = true;
  }
});

$('picture').addEventListener('change', () => {
  const file = $('picture').files[0];
  if (!file) return;
  const reader = new FileReader();
  reader.onload = () => {
    picture = reader.result;
    Object.assign($('thumb'), { src: picture, hidden: false });
  };
  reader.readAsDataURL(file);
});

$('ask-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  const question = $('question').value.trim();
  if (!question || !model) return;
  $('question').value = '';
  const content = picture
    ? [{ type: 'image_url', image_url: { url: picture } }, { type: 'text', text: question }]
    : question;
  addTurn('user', question, picture);
  picture = null;
  Object.assign($('thumb'), { hidden: true, src: '' });
  $('picture').value = '';
  messages.push({ role: 'user', content });
  const answer = addTurn('assistant', '');
  answering = new AbortController();
  setBusy(true);
  try {
    const stream = await model.chat.completions.create(
      { messages, max_tokens: Number($('max-tokens').value), stream: true }, { signal: answering.signal });
    for await (const chunk of stream) {
      answer.textContent += chunk.choices[0]?.delta?.content ?? '';
      const done = chunk.choices[0]?.finish_reason;
      if (done) {
        const { usage, webpte } = chunk;
        $('status').textContent = `${usage.prompt_tokens} prompt tokens (${webpte.reusedRows} reused), `
          + `${usage.completion_tokens} new at ${webpte.decodeTokensPerSecond.toFixed(1)} tokens/s`
          + (done === 'abort' ? ', stopped' : '');
      }
    }
    messages.push({ role: 'assistant', content: answer.textContent });
  } catch (err) {
    messages.pop();
    $('status').textContent = err instanceof ContextFullError
      ? 'The conversation is full: start a new one.'
      : `${err.name}: ${err.message}`;
  } finally {
    answering = null;
    setBusy(false);
  }
});

$('stop').addEventListener('click', () => answering?.abort());

$('new-chat').addEventListener('click', () => {
  messages = [];
  $('log').replaceChildren();
  $('status').textContent = `${model.name}: a new conversation.`;
});
