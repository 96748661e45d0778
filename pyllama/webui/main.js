// The page's start and its wiring: the server's /props (model, context size, image input,
// router mode, --webui-config defaults), the composer (Enter sends, Shift+Enter starts a
// new line, Esc stops), the open conversation and its replies, the key prompt.

import { $, h, randomId } from './dom.js';
import { ApiError, apiKey, getJson, setKeyPrompt } from './api.js';
import { getConversation, saveConversation, titleOf } from './store.js';
import { Replies } from './generate.js';
import { nodeOf, showConversation, statsText, updateAssistant } from './view.js';
import { defaultTheme, effective, openSettings, useServerDefaults } from './settings.js';
import { applyTheme, currentTheme, cycleTheme } from './theme.js';
import { closeSidebar, drawList, exportAll, toggleSidebar } from './sidebar.js';
import { ModelPicker } from './models.js';

const CURRENT = 'pyllama.current';
const SAVE_EVERY_MS = 400;

const state = {
  params: null, // the server's sampling defaults (/props)
  router: false,
  nCtx: 0,
  vision: false,
  conv: null, // the conversation on screen (null: a new one, not saved yet)
  attachments: [], // data URLs of the images waiting to be sent
  picker: null,
};
const live = new Map(); // id -> conversation object, for every reply running in this page
const lastSave = new Map();
const replies = new Replies(changed);

const sleep = (ms) => new Promise((resolve) => { setTimeout(resolve, ms); });

function banner(text) {
  const el = $('#banner');
  el.hidden = !text;
  el.textContent = text || '';
}

function askKey(reason) {
  return new Promise((resolve) => {
    const dialog = $('#key-dialog');
    $('#key-why').textContent = reason;
    $('#key-input').value = '';
    const done = (value) => {
      if (dialog.open) dialog.close();
      resolve(value);
    };
    $('#key-form').onsubmit = (e) => {
      e.preventDefault();
      done($('#key-input').value.trim() || null);
    };
    $('#key-cancel').onclick = () => done(null);
    dialog.oncancel = () => done(null);
    dialog.showModal();
    $('#key-input').focus();
  });
}

function showKeyState() {
  $('#key-state').textContent = apiKey.get() ? 'saved in this browser' : 'none saved';
}

function useModelProps(props) {
  state.params = (props.default_generation_settings || {}).params || {};
  state.nCtx = (props.default_generation_settings || {}).n_ctx || 0;
  state.vision = Boolean(props.modalities && props.modalities.vision);
  refreshComposer();
}

async function loadProps() {
  for (;;) {
    try {
      const props = await getJson('props');
      banner('');
      state.router = props.role === 'router';
      useServerDefaults(props.ui_settings);
      applyTheme(currentTheme(defaultTheme()), $('#theme'));
      if (state.router) {
        $('#model-name').hidden = true;
        state.picker = new ModelPicker(async (name) => useModelProps(await getJson(`props?model=${encodeURIComponent(name)}`)));
        const name = await state.picker.refresh();
        if (name && state.picker.statusOf(name).value === 'loaded') state.picker.onReady(name);
      } else {
        const path = props.model_alias || props.model_path || '';
        replies.modelName = props.model_alias || '';
        $('#model-name').textContent = path.split('/').pop() || 'model';
        useModelProps(props);
      }
      return;
    } catch (e) {
      const loading = e instanceof ApiError && e.status === 503;
      banner(loading ? 'The server is loading the model...' : `The server did not answer: ${e.message}`);
      await sleep(loading ? 500 : 3000);
    }
  }
}

function refreshComposer() {
  const running = Boolean(state.conv && replies.isRunning(state.conv.id));
  $('#send').hidden = running;
  $('#stop').hidden = !running;
  const attach = $('#attach');
  attach.disabled = !state.vision;
  attach.title = state.vision ? 'Attach an image' : 'Attach an image (the model has no image input)';
  const msgs = state.conv ? state.conv.messages : [];
  const last = [...msgs].reverse().find((m) => m.role === 'assistant' && m.timings);
  const context = last ? statsText({ timings: last.timings }, state.nCtx).split(' \u00b7 ').filter((p) => p.startsWith('context')) : [];
  $('#stats').textContent = context.length ? `This conversation uses ${context[0].slice(8)} of the context.` : '';
}

async function save(conv) {
  if (conv.deleted) return;
  lastSave.set(conv.id, Date.now());
  await saveConversation(conv);
}

let frame = 0;
function changed(conv, msg, final) {
  if (state.conv === conv && !frame) {
    frame = requestAnimationFrame(() => {
      frame = 0;
      const node = nodeOf(msg.id);
      if (node) updateAssistant(node, msg, state.nCtx);
      refreshComposer(); // Stop shows while a reply (a resumed one too) runs
    });
  }
  if (final) {
    live.delete(conv.id);
    conv.updated = Date.now();
    save(conv).then(() => drawList(listActions));
    if (state.conv === conv) {
      const node = nodeOf(msg.id);
      if (node) updateAssistant(node, msg, state.nCtx);
      refreshComposer();
    }
  } else if (Date.now() - (lastSave.get(conv.id) || 0) > SAVE_EVERY_MS) {
    save(conv); // what a reload resumes from: the text and the byte offset it reaches
  }
}

const viewActions = {
  busy: () => Boolean(state.conv && replies.isRunning(state.conv.id)),
  edit(index, text) {
    const conv = state.conv;
    if (!conv || replies.isRunning(conv.id) || !text.trim()) return;
    const old = conv.messages[index];
    conv.messages = conv.messages.slice(0, index);
    conv.messages.push({ ...old, id: randomId(), content: text });
    reply(conv);
  },
  regenerate(index) {
    const conv = state.conv;
    if (!conv || replies.isRunning(conv.id)) return;
    conv.messages = conv.messages.slice(0, index);
    reply(conv);
  },
};

const listActions = {
  open: async (id) => open(live.get(id) || (await getConversation(id)) || null),
  currentId: () => (state.conv ? state.conv.id : null),
  async deleted(id) {
    const conv = live.get(id) || (state.conv && state.conv.id === id ? state.conv : null);
    if (conv) {
      conv.deleted = true;
      await replies.stop(conv);
    }
    if (state.conv && state.conv.id === id) await open(null);
  },
  async renamed(id) {
    const fresh = await getConversation(id);
    for (const conv of [state.conv, live.get(id)]) if (conv && conv.id === id && fresh) conv.title = fresh.title;
  },
};

async function open(conv) {
  state.conv = conv;
  if (conv) localStorage.setItem(CURRENT, conv.id);
  else localStorage.removeItem(CURRENT);
  showConversation(conv, state.nCtx, viewActions);
  refreshComposer();
  await drawList(listActions);
  const last = conv && conv.messages[conv.messages.length - 1];
  if (last && last.role === 'assistant' && ['streaming', 'resuming'].includes(last.state) && !replies.isRunning(conv.id)) {
    live.set(conv.id, conv); // a reply cut by a reload: read the rest from the server
    const running = replies.resume(conv, last);
    refreshComposer();
    await running;
  }
}

async function reply(conv) {
  const msg = { id: randomId(), role: 'assistant', content: '', state: 'streaming' };
  conv.messages.push(msg);
  conv.updated = Date.now();
  live.set(conv.id, conv);
  const running = replies.start(conv, msg);
  await save(conv);
  showConversation(conv, state.nCtx, viewActions);
  refreshComposer();
  await drawList(listActions);
  await running;
}

async function send() {
  const prompt = $('#prompt');
  const text = prompt.value;
  if ((!text.trim() && !state.attachments.length) || (state.conv && replies.isRunning(state.conv.id))) return;
  const conv = state.conv || { id: randomId(), title: '', created: Date.now(), updated: Date.now(), messages: [] };
  if (state.router) {
    const name = state.picker.current;
    if (!name || (state.picker.statusOf(name).value !== 'loaded' && !(await state.picker.pick(name)))) return;
    conv.model = name;
  }
  const user = { id: randomId(), role: 'user', content: text };
  if (state.attachments.length) user.images = state.attachments;
  conv.messages.push(user);
  if (!conv.title) conv.title = titleOf(conv);
  prompt.value = '';
  resize(prompt);
  state.attachments = [];
  drawAttachments();
  state.conv = conv;
  localStorage.setItem(CURRENT, conv.id);
  await reply(conv);
}

function resize(area) {
  area.style.height = 'auto';
  area.style.height = `${Math.min(area.scrollHeight, 240)}px`;
}

function drawAttachments() {
  const box = $('#attachments');
  box.hidden = !state.attachments.length;
  box.replaceChildren(...state.attachments.map((src, i) => h('span', { class: 'attachment' },
    h('img', { src, alt: 'image to send', class: 'thumb' }),
    h('button', { type: 'button', class: 'icon', title: 'Remove', 'aria-label': 'Remove image', onclick: () => {
      state.attachments.splice(i, 1);
      drawAttachments();
    } }, '\u2715'))));
}

function readDataUrl(file) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(reader.result);
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(file);
  });
}

function wire() {
  const prompt = $('#prompt');
  $('#composer').addEventListener('submit', (e) => {
    e.preventDefault();
    send();
  });
  prompt.addEventListener('keydown', (e) => {
    if (e.key !== 'Enter' || e.shiftKey || e.isComposing) return;
    if (effective().sendOnEnter || e.ctrlKey || e.metaKey) {
      e.preventDefault();
      send();
    }
  });
  prompt.addEventListener('input', () => resize(prompt));
  document.addEventListener('keydown', (e) => {
    if (e.key !== 'Escape' || document.querySelector('dialog[open]')) return;
    if (state.conv && replies.isRunning(state.conv.id)) {
      e.preventDefault();
      replies.stop(state.conv);
    } else {
      closeSidebar();
    }
  });
  $('#stop').addEventListener('click', () => state.conv && replies.stop(state.conv));
  $('#new-chat').addEventListener('click', () => {
    closeSidebar();
    open(null);
    prompt.focus();
  });
  $('#export-all').addEventListener('click', exportAll);
  $('#menu').addEventListener('click', toggleSidebar);
  $('#scrim').addEventListener('click', closeSidebar);
  $('#theme').addEventListener('click', () => cycleTheme($('#theme'), defaultTheme()));
  $('#settings-btn').addEventListener('click', () => {
    showKeyState();
    openSettings(state.params, refreshComposer);
  });
  $('#forget-key').addEventListener('click', () => {
    apiKey.set('');
    showKeyState();
  });
  $('#attach').addEventListener('click', () => $('#file-input').click());
  $('#file-input').addEventListener('change', async (e) => {
    for (const file of e.target.files) {
      if (file.type.startsWith('image/')) state.attachments.push(await readDataUrl(file));
    }
    e.target.value = '';
    drawAttachments();
  });
}

async function boot() {
  applyTheme(currentTheme(), $('#theme'));
  setKeyPrompt(askKey);
  wire();
  await loadProps();
  const id = localStorage.getItem(CURRENT);
  const conv = id ? await getConversation(id) : null;
  const opening = open(conv || null);
  document.body.dataset.ready = 'true';
  performance.mark('pyllama-ready'); // how long the page took to be usable
  await opening;
}

boot();
