// The conversation on screen: one <article class="msg"> per message. User messages show
// as plain text (with their images), replies as markdown with the thinking part folded
// and a line of statistics (tokens per second, tokens, context used) from the server's
// timings. Each message has its actions: copy; edit and send again (user); regenerate
// (the last reply).

import { $, h, copyButton } from './dom.js';
import { renderMarkdown } from './markdown.js';

const messages = () => $('#messages');

/** "12.3 tokens/s · 48 tokens · context 300/8192 (4%)" from a reply's timings. */
export function statsText(msg, nCtx) {
  const t = msg.timings;
  const parts = [];
  if (t) {
    if (t.predicted_per_second > 0) parts.push(`${t.predicted_per_second.toFixed(1)} tokens/s`);
    if (t.predicted_n > 0) parts.push(`${t.predicted_n} tokens`);
    const used = (t.cache_n || 0) + (t.prompt_n || 0) + (t.predicted_n || 0);
    if (nCtx > 0 && used > 0) parts.push(`context ${used}/${nCtx} (${Math.round((100 * used) / nCtx)}%)`);
  }
  if (msg.progress && msg.state === 'streaming' && !msg.content && !msg.reasoning) {
    parts.push(`reading the prompt ${Math.round(100 * msg.progress)}%`);
  }
  if (msg.state === 'stopped') parts.push('stopped');
  if (msg.state === 'resuming') parts.push('resuming...');
  if (msg.interrupted) parts.push('interrupted: the server no longer has the rest');
  return parts.join(' \u00b7 ');
}

function nearBottom() {
  const el = document.scrollingElement;
  return el.scrollHeight - el.scrollTop - el.clientHeight < 120;
}

export function scrollToEnd() {
  const el = document.scrollingElement;
  el.scrollTop = el.scrollHeight;
}

function userNode(msg, index, actions) {
  const content = h('div', { class: 'content' }, msg.content);
  const images = (msg.images || []).map((src) => h('img', { src, alt: 'attached image', class: 'thumb' }));
  const bubble = h('div', { class: 'bubble' }, images.length ? h('div', { class: 'images' }, images) : null, content);
  const edit = h('button', { type: 'button', class: 'edit', title: 'Edit and send again' }, 'Edit');
  edit.addEventListener('click', () => {
    if (actions.busy()) return;
    const area = h('textarea', { class: 'edit-area', rows: 4 });
    area.value = msg.content;
    const save = h('button', { type: 'button', class: 'primary' }, 'Send');
    const cancel = h('button', { type: 'button' }, 'Cancel');
    const box = h('div', { class: 'editing' }, area, h('div', { class: 'buttons' }, cancel, save));
    content.replaceWith(box);
    area.focus();
    cancel.addEventListener('click', () => box.replaceWith(content));
    save.addEventListener('click', () => actions.edit(index, area.value));
  });
  return h('article', { class: 'msg user', dataset: { id: msg.id } }, bubble,
    h('div', { class: 'meta' }, h('span', { class: 'actions' }, copyButton(() => msg.content), edit)));
}

function assistantNode(msg, index, isLast, actions) {
  const thinking = h('details', { class: 'thinking' }, h('summary', {}, 'Thinking'), h('div', { class: 'thinking-body' }));
  const regenerate = isLast
    ? h('button', { type: 'button', class: 'regenerate', title: 'Generate this reply again', onclick: () => actions.regenerate(index) }, 'Regenerate')
    : null;
  const node = h('article', { class: 'msg assistant', dataset: { id: msg.id } },
    h('div', { class: 'bubble' }, thinking, h('div', { class: 'content md' }), h('div', { class: 'error', hidden: true })),
    h('div', { class: 'meta' }, h('span', { class: 'stats' }),
      h('span', { class: 'actions' }, copyButton(() => msg.content), regenerate)));
  return node;
}

/** Brings a reply's node up to date with ``msg`` (called as it streams). */
export function updateAssistant(node, msg, nCtx) {
  const follow = nearBottom();
  node.dataset.state = msg.state || 'done';
  const thinking = node.querySelector('.thinking');
  thinking.hidden = !msg.reasoning;
  if (msg.reasoning) {
    thinking.querySelector('.thinking-body').textContent = msg.reasoning;
    thinking.querySelector('summary').textContent = msg.state === 'streaming' && !msg.content ? 'Thinking...' : 'Thoughts';
  }
  node.querySelector('.content').replaceChildren(renderMarkdown(msg.content || ''));
  const error = node.querySelector('.error');
  error.hidden = !msg.error;
  error.textContent = msg.error || '';
  node.querySelector('.stats').textContent = statsText(msg, nCtx);
  if (follow) scrollToEnd();
}

/** Shows ``conv`` (null: an empty page). ``actions``: {busy(), edit(i, text), regenerate(i)}. */
export function showConversation(conv, nCtx, actions) {
  const list = messages();
  const nodes = [];
  const msgs = conv ? conv.messages : [];
  msgs.forEach((msg, i) => {
    if (msg.role === 'user') {
      nodes.push(userNode(msg, i, actions));
    } else {
      const node = assistantNode(msg, i, i === msgs.length - 1, actions);
      updateAssistant(node, msg, nCtx);
      nodes.push(node);
    }
  });
  $('#empty').hidden = nodes.length > 0;
  list.replaceChildren($('#empty'), ...nodes);
  scrollToEnd();
}

/** The node of the message ``id`` on screen, or null. */
export function nodeOf(id) {
  return [...messages().querySelectorAll('article.msg')].find((n) => n.dataset.id === id) || null;
}
