// The settings panel: system prompt, the sampling fields the server takes, extra request
// fields (a JSON object merged into every request) and the theme. Kept in localStorage.
// The server's --webui-config (/props "ui_settings", with llama-server's UI keys) gives the
// defaults under the user's own values; keys this page has no use for are listed in the
// panel, never dropped silently.

import { $, h } from './dom.js';

const STORAGE = 'pyllama.settings';

/** The sampling fields offered: request field, label, step (integer fields step 1). */
export const FIELDS = [
  ['temperature', 'Temperature', 0.05],
  ['top_k', 'Top-k', 1],
  ['top_p', 'Top-p', 0.01],
  ['min_p', 'Min-p', 0.01],
  ['typical_p', 'Typical-p', 0.01],
  ['max_tokens', 'Max tokens', 1],
  ['repeat_penalty', 'Repeat penalty', 0.01],
  ['repeat_last_n', 'Repeat last n', 1],
  ['presence_penalty', 'Presence penalty', 0.01],
  ['frequency_penalty', 'Frequency penalty', 0.01],
  ['dry_multiplier', 'DRY multiplier', 0.01],
  ['xtc_probability', 'XTC probability', 0.01],
  ['xtc_threshold', 'XTC threshold', 0.01],
  ['seed', 'Seed', 1],
];
const FIELD_KEYS = new Set(FIELDS.map(([key]) => key));
// llama-server's UI keys that name the same things differently
const ALIASES = { typ_p: 'typical_p', systemMessage: 'system', custom: 'extra', customJson: 'extra' };
const OTHER_KEYS = new Set(['theme', 'sendOnEnter', 'apiKey']);

let serverDefaults = { system: '', extra: '', sampling: {}, theme: 'system', sendOnEnter: true };
let ignoredKeys = [];

/** Takes /props "ui_settings": the defaults under the user's settings. */
export function useServerDefaults(ui) {
  const out = { system: '', extra: '', sampling: {}, theme: 'system', sendOnEnter: true };
  ignoredKeys = [];
  for (const [rawKey, value] of Object.entries(ui || {})) {
    const key = ALIASES[rawKey] || rawKey;
    if (FIELD_KEYS.has(key) && value !== '' && value !== null && Number.isFinite(Number(value))) {
      out.sampling[key] = String(value);
    } else if (key === 'system' && typeof value === 'string') {
      out.system = value;
    } else if (key === 'extra' && value) {
      out.extra = typeof value === 'string' ? value : JSON.stringify(value);
    } else if (key === 'theme' && ['system', 'light', 'dark'].includes(value)) {
      out.theme = value;
    } else if (key === 'sendOnEnter' && typeof value === 'boolean') {
      out.sendOnEnter = value;
    } else if (!OTHER_KEYS.has(key)) {
      ignoredKeys.push(rawKey);
    }
  }
  if (ignoredKeys.length) console.warn('ui_settings this page does not use:', ignoredKeys);
  serverDefaults = out;
}

/** The user's own settings ({system, extra, sampling}: empty strings where unset). */
export function loadSettings() {
  try {
    const saved = JSON.parse(localStorage.getItem(STORAGE) || '{}');
    return { system: saved.system ?? null, extra: saved.extra ?? null, sampling: saved.sampling || {}, sendOnEnter: saved.sendOnEnter ?? null };
  } catch {
    return { system: null, extra: null, sampling: {}, sendOnEnter: null };
  }
}

function saveSettings(s) {
  localStorage.setItem(STORAGE, JSON.stringify(s));
}

/** What a setting is now: the user's value, else the server's default. */
export function effective() {
  const own = loadSettings();
  const sampling = { ...serverDefaults.sampling };
  for (const [key, value] of Object.entries(own.sampling)) if (value !== '') sampling[key] = value;
  return {
    system: own.system ?? serverDefaults.system,
    extra: own.extra ?? serverDefaults.extra,
    sendOnEnter: own.sendOnEnter ?? serverDefaults.sendOnEnter,
    sampling,
  };
}

export const defaultTheme = () => serverDefaults.theme;

function parseExtra(text) {
  if (!text.trim()) return {};
  const value = JSON.parse(text);
  if (!value || typeof value !== 'object' || Array.isArray(value)) throw new Error('a JSON object is needed');
  return value;
}

/** The request fields the settings add to a chat request. */
export function requestFields() {
  const s = effective();
  const out = {};
  for (const [key, , step] of FIELDS) {
    const raw = s.sampling[key];
    if (raw === undefined || raw === '') continue;
    out[key] = step === 1 ? parseInt(raw, 10) : Number(raw);
  }
  let extra = {};
  try {
    extra = parseExtra(s.extra || '');
  } catch {
    extra = {}; // refused when saved; a bad server default is reported in the panel
  }
  return { ...out, ...extra };
}

/** Opens the panel; ``params`` are the server's current sampling defaults (placeholders). */
export function openSettings(params, onSaved) {
  const dialog = $('#settings');
  const form = $('#settings-form');
  const own = loadSettings();
  const s = effective();
  form.elements.system.value = s.system;
  form.elements.extra.value = s.extra;
  const fieldset = $('#sampling');
  fieldset.replaceChildren(h('legend', {}, 'Sampling (empty: the server\'s default)'));
  for (const [key, label] of FIELDS) {
    let server = params ? params[key === 'max_tokens' ? 'n_predict' : key] : undefined;
    if (typeof server === 'number' && !Number.isInteger(server)) server = Number(server.toPrecision(6)); // float32 noise
    const fallback = serverDefaults.sampling[key] ?? server ?? '';
    fieldset.append(h('label', {}, label,
      h('input', { name: key, type: 'number', step: 'any', value: own.sampling[key] ?? '', placeholder: fallback })));
  }
  const error = $('#settings-error');
  error.hidden = true;
  const ignored = $('#ui-ignored');
  ignored.hidden = !ignoredKeys.length;
  ignored.textContent = ignoredKeys.length ? `Server defaults this page does not use: ${ignoredKeys.join(', ')}` : '';
  form.onsubmit = (event) => {
    event.preventDefault();
    try {
      parseExtra(form.elements.extra.value);
    } catch (e) {
      error.textContent = `Extra request fields: ${e.message}`;
      error.hidden = false;
      return;
    }
    const sampling = {};
    for (const [key] of FIELDS) sampling[key] = form.elements[key].value.trim();
    // a text left as the server's default stays the server's (it follows --webui-config)
    const mine = (name) => {
      const value = form.elements[name].value;
      return own[name] === null && value === serverDefaults[name] ? null : value;
    };
    saveSettings({ system: mine('system'), extra: mine('extra'), sampling, sendOnEnter: own.sendOnEnter });
    dialog.close();
    onSaved();
  };
  $('#settings-reset').onclick = () => {
    localStorage.removeItem(STORAGE);
    dialog.close();
    openSettings(params, onSaved);
  };
  $('#settings-cancel').onclick = () => dialog.close();
  dialog.showModal();
}
