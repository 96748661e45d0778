// Router mode's model picker: the models of GET /models with their status; picking one that
// is not running loads it (POST /models/load) and shows how the load goes (elapsed time,
// download progress) until /models says "loaded" or that it failed.

import { $, h } from './dom.js';
import { ApiError, getJson, request } from './api.js';

const STORAGE = 'pyllama.model';
const POLL_MS = 400;

function progressOf(status) {
  let done = 0;
  let total = 0;
  for (const p of Object.values(status.progress || {})) {
    done += p.done || 0;
    total += p.total || 0;
  }
  return total > 0 ? ` ${Math.floor((100 * done) / total)}%` : '';
}

export class ModelPicker {
  constructor(onReady) {
    this.onReady = onReady; // (name) => void, once a picked model runs
    this.select = $('#model-select');
    this.status = $('#model-status');
    this.models = [];
    this.select.addEventListener('change', () => this.pick(this.select.value));
  }

  get current() {
    return this.select.value || null;
  }

  async refresh() {
    const listing = await getJson('models');
    this.models = listing.data || [];
    const keep = this.select.value || localStorage.getItem(STORAGE);
    this.select.replaceChildren(...this.models.map((m) => {
      const state = m.status ? m.status.value : '';
      return h('option', { value: m.id }, state === 'loaded' ? m.id : `${m.id} (${state})`);
    }));
    const running = this.models.find((m) => m.status && m.status.value === 'loaded');
    const chosen = this.models.find((m) => m.id === keep) || running || this.models[0];
    if (chosen) this.select.value = chosen.id;
    this.select.hidden = false;
    return chosen ? chosen.id : null;
  }

  statusOf(name) {
    const m = this.models.find((x) => x.id === name);
    return m && m.status ? m.status : { value: 'unknown' };
  }

  /** Selects ``name``, loading it when it does not run; resolves once it runs. */
  async pick(name) {
    if (!name) return false;
    localStorage.setItem(STORAGE, name);
    this.select.value = name;
    const started = Date.now();
    this.loading = name;
    try {
      await request('models/load', { method: 'POST', json: { model: name } });
    } catch (e) {
      // "already running" or "downloading": watched below like any other state
      if (!(e instanceof ApiError) || e.status !== 400) return this.#failed(name, e.message);
    }
    for (;;) {
      await this.refresh();
      if (this.loading !== name) return false; // another pick took over
      const status = this.statusOf(name);
      const seconds = Math.round((Date.now() - started) / 1000);
      if (status.value === 'loaded') {
        this.status.textContent = '';
        this.loading = null;
        this.onReady(name);
        return true;
      }
      if (status.value === 'failed' || (status.value === 'unloaded' && seconds > 2)) {
        return this.#failed(name, status.exit_code !== undefined ? `exit code ${status.exit_code}` : status.value);
      }
      this.status.textContent = `${status.value} ${name}${progressOf(status)}... ${seconds} s`;
      await new Promise((resolve) => { setTimeout(resolve, POLL_MS); });
    }
  }

  #failed(name, why) {
    this.loading = null;
    this.status.textContent = `${name} could not be loaded: ${why}`;
    return false;
  }
}
