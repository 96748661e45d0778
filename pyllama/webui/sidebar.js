// The list of conversations: open, rename, delete, export one or all as JSON. On a narrow
// screen the list slides over the page (the header's menu button).

import { $, h, download } from './dom.js';
import { deleteConversation, getConversation, listConversations, saveConversation } from './store.js';

function stamp() {
  return new Date().toISOString().slice(0, 19).replace(/[:T]/g, '-');
}

export function exportJson(convs, name) {
  download(name, JSON.stringify({ format: 'pyllama-conversations', version: 1, conversations: convs }, null, 2));
}

export function closeSidebar() {
  document.body.classList.remove('sidebar-open');
  $('#scrim').hidden = true;
}

export function toggleSidebar() {
  const open = document.body.classList.toggle('sidebar-open');
  $('#scrim').hidden = !open;
}

let renaming = false; // a title being edited: redraws wait until it is done

/** Draws the list; ``actions``: {open(id), deleted(id), renamed(id), currentId()}. */
export async function drawList(actions) {
  if (renaming) return;
  const convs = await listConversations();
  if (renaming) return;
  const items = convs.map((conv) => {
    const title = h('button', { type: 'button', class: 'title', title: conv.title }, conv.title);
    title.addEventListener('click', () => {
      closeSidebar();
      actions.open(conv.id);
    });
    const rename = h('button', { type: 'button', class: 'icon rename', title: 'Rename', 'aria-label': 'Rename' }, '\u270e');
    rename.addEventListener('click', () => {
      const input = h('input', { class: 'rename-input', value: conv.title, 'aria-label': 'New title' });
      title.replaceWith(input);
      input.focus();
      input.select();
      renaming = true;
      let done = false;
      const finish = async (keep) => {
        if (done) return;
        done = true;
        renaming = false;
        const fresh = await getConversation(conv.id);
        if (keep && fresh && input.value.trim()) {
          fresh.title = input.value.trim();
          await saveConversation(fresh);
        }
        await drawList(actions);
        actions.renamed(conv.id);
      };
      input.addEventListener('keydown', (e) => {
        if (e.key === 'Enter') finish(true);
        if (e.key === 'Escape') {
          e.stopPropagation();
          finish(false);
        }
      });
      input.addEventListener('blur', () => finish(true));
    });
    const remove = h('button', { type: 'button', class: 'icon delete', title: 'Delete', 'aria-label': 'Delete' }, '\u2715');
    remove.addEventListener('click', async () => {
      if (!window.confirm(`Delete "${conv.title}"?`)) return;
      await deleteConversation(conv.id);
      await drawList(actions);
      actions.deleted(conv.id);
    });
    const save = h('button', { type: 'button', class: 'icon export', title: 'Export as JSON', 'aria-label': 'Export' }, '\u2913');
    save.addEventListener('click', () => exportJson([conv], `pyllama-${conv.id}.json`));
    const current = conv.id === actions.currentId();
    return h('li', { class: current ? 'current' : '', dataset: { id: conv.id } }, title, h('span', { class: 'tools' }, rename, save, remove));
  });
  $('#conversations').replaceChildren(...items);
}

export async function exportAll() {
  exportJson(await listConversations(), `pyllama-conversations-${stamp()}.json`);
}
