// Markdown to DOM nodes, for model replies: paragraphs, headings, lists (nested, ordered,
// task boxes), block quotes, tables, fenced code with a copy button, rules; inline code,
// emphasis, strike-through, links and bare URLs. Every piece of text becomes a text node
// (dom.js's h and append), never HTML: a reply holding "<img onerror=...>" shows those
// characters. Links go out only as absolute http(s) and mailto URLs, opened in a new tab
// without a referrer; images are shown as links, never loaded (the page fetches nothing
// that model text names). Unclosed constructs (a reply still streaming) render as text,
// and a fence still open renders as code up to the end.

import { h, append, copyButton } from './dom.js';

const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([^\s`]*)[^`]*$/;
const HEADING = /^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$/;
const RULE = /^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$/;
const QUOTE = /^ {0,3}>[ \t]?(.*)$/;
const ITEM = /^([ \t]*)([-*+]|\d{1,9}[.)])(?:[ \t]+(.*)|[ \t]*$)/;
const TABLE_RULE = /^[ \t]*\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$/;
const PUNCTUATION = /[!-/:-@[-`{-~]/;
const BARE_URL = /^(?:https?:\/\/|www\.)[^\s<>"]*[^\s<>"'.,:;!?)\]}*_~]/;
const MAX_DEPTH = 16; // nested quotes and lists deeper than this render as text

/** A DocumentFragment holding ``text`` rendered. */
export function renderMarkdown(text) {
  const fragment = document.createDocumentFragment();
  blocks(String(text).replace(/\r\n?/g, '\n').split('\n'), fragment, 0);
  return fragment;
}

function indentOf(line) {
  return /^[ \t]*/.exec(line)[0].replace(/\t/g, '    ').length;
}

function isTableStart(lines, i) {
  return lines[i].includes('|') && i + 1 < lines.length && lines[i + 1].includes('-')
    && TABLE_RULE.test(lines[i + 1]);
}

function startsBlock(lines, i) {
  const line = lines[i];
  return FENCE.test(line) || HEADING.test(line) || RULE.test(line) || QUOTE.test(line)
    || ITEM.test(line) || isTableStart(lines, i);
}

function blocks(lines, parent, depth) {
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    let m;
    if (!line.trim()) {
      i++;
    } else if ((m = FENCE.exec(line))) {
      i = fence(lines, i, m, parent);
    } else if ((m = HEADING.exec(line))) {
      parent.append(inline(m[2] || '', h(`h${m[1].length}`)));
      i++;
    } else if (RULE.test(line)) {
      parent.append(h('hr'));
      i++;
    } else if (depth < MAX_DEPTH && QUOTE.test(line)) {
      i = quote(lines, i, parent, depth);
    } else if (depth < MAX_DEPTH && ITEM.test(line)) {
      i = list(lines, i, parent, depth);
    } else if (isTableStart(lines, i)) {
      i = table(lines, i, parent);
    } else {
      i = paragraph(lines, i, parent);
    }
  }
}

function fence(lines, start, open, parent) {
  const marker = open[1];
  const body = [];
  let i = start + 1;
  for (; i < lines.length; i++) {
    const close = /^ {0,3}(`{3,}|~{3,})[ \t]*$/.exec(lines[i]);
    if (close && close[1][0] === marker[0] && close[1].length >= marker.length) {
      i++;
      break;
    }
    body.push(lines[i]);
  }
  parent.append(codeBlock(open[2], body.join('\n')));
  return i;
}

/** A fenced code block: its language, a copy button, the code as text. */
export function codeBlock(language, code) {
  const lang = language.replace(/[^\w+#.-]/g, '').slice(0, 32);
  return h('div', { class: 'code-block' },
    h('div', { class: 'code-head' }, h('span', { class: 'lang' }, lang || 'text'),
      copyButton(() => code)),
    h('pre', {}, h('code', lang ? { class: `language-${lang}` } : {}, code)));
}

function quote(lines, start, parent, depth) {
  const inner = [];
  let i = start;
  while (i < lines.length && lines[i].trim()) {
    const m = QUOTE.exec(lines[i]);
    if (!m && startsBlock(lines, i)) break;
    inner.push(m ? m[1] : lines[i]); // a line without '>' continues the quote's paragraph
    i++;
  }
  const el = h('blockquote');
  blocks(inner, el, depth + 1);
  parent.append(el);
  return i;
}

function list(lines, start, parent, depth) {
  const first = ITEM.exec(lines[start]);
  const indent = indentOf(first[1]);
  const ordered = /\d/.test(first[2]);
  const el = ordered ? h('ol', parseInt(first[2], 10) !== 1 ? { start: parseInt(first[2], 10) } : {}) : h('ul');
  const items = [];
  let loose = false;
  let i = start;
  while (i < lines.length) {
    const line = lines[i];
    const m = ITEM.exec(line);
    if (m && indentOf(m[1]) === indent && /\d/.test(m[2]) === ordered) {
      items.push([m[3] || '']);
      i++;
    } else if (!line.trim()) {
      let j = i + 1;
      while (j < lines.length && !lines[j].trim()) j++;
      const next = j < lines.length ? ITEM.exec(lines[j]) : null;
      const same = next && indentOf(next[1]) === indent && /\d/.test(next[2]) === ordered;
      if (j < lines.length && (indentOf(lines[j]) > indent || same)) {
        loose = true;
        items[items.length - 1].push('');
        i++;
      } else {
        break;
      }
    } else if (indentOf(line) > indent) {
      items[items.length - 1].push(line); // a nested list or a continued paragraph
      i++;
    } else if (!m && !startsBlock(lines, i) && items[items.length - 1].at(-1).trim()) {
      items[items.length - 1].push(line); // a lazy continuation line
      i++;
    } else {
      break;
    }
  }
  for (const body of items) {
    const li = h('li');
    const task = /^\[([ xX])\][ \t]+/.exec(body[0]);
    if (task) {
      li.className = 'task';
      body[0] = body[0].slice(task[0].length);
      li.append(h('span', { class: 'box', 'aria-hidden': 'true' }, task[1] === ' ' ? '\u2610 ' : '\u2611 '));
    }
    blocks(dedent(body), li, depth + 1);
    if (!loose) {
      for (const p of [...li.children].filter((c) => c.tagName === 'P')) p.replaceWith(...p.childNodes);
    }
    el.append(li);
  }
  parent.append(el);
  return i;
}

function dedent(body) {
  const rest = body.slice(1).filter((l) => l.trim());
  const cut = rest.length ? Math.min(...rest.map(indentOf)) : 0;
  return [body[0], ...body.slice(1).map((l) => l.replace(/\t/g, '    ').slice(Math.min(cut, indentOf(l))))];
}

function cells(line) {
  let s = line.trim();
  if (s.startsWith('|')) s = s.slice(1);
  if (s.endsWith('|') && !s.endsWith('\\|')) s = s.slice(0, -1);
  const out = [];
  let cell = '';
  let code = false;
  for (let k = 0; k < s.length; k++) {
    if (s[k] === '\\' && s[k + 1] === '|') {
      cell += '|';
      k++;
    } else if (s[k] === '|' && !code) {
      out.push(cell.trim());
      cell = '';
    } else {
      if (s[k] === '`') code = !code;
      cell += s[k];
    }
  }
  out.push(cell.trim());
  return out;
}

function table(lines, start, parent) {
  const head = cells(lines[start]);
  const aligns = cells(lines[start + 1]).map((c) => {
    if (c.startsWith(':') && c.endsWith(':')) return 'center';
    if (c.endsWith(':')) return 'right';
    return c.startsWith(':') ? 'left' : '';
  });
  const cell = (tag, text, k) => inline(text, h(tag, aligns[k] ? { class: `align-${aligns[k]}` } : {}));
  const tbody = h('tbody');
  let i = start + 2;
  for (; i < lines.length && lines[i].trim() && lines[i].includes('|'); i++) {
    const row = cells(lines[i]);
    tbody.append(h('tr', {}, head.map((_, k) => cell('td', row[k] || '', k))));
  }
  const thead = h('thead', {}, h('tr', {}, head.map((text, k) => cell('th', text, k))));
  parent.append(h('div', { class: 'table-wrap' }, h('table', {}, thead, tbody)));
  return i;
}

function paragraph(lines, start, parent) {
  const text = [lines[start]];
  let i = start + 1;
  while (i < lines.length && lines[i].trim() && !startsBlock(lines, i)) text.push(lines[i++]);
  parent.append(inline(text.join('\n').trim(), h('p')));
  return i;
}

/** An absolute http(s) or mailto URL, or null: nothing else becomes a link. */
export function safeUrl(raw) {
  const text = raw.trim();
  const url = /^www\./i.test(text) ? `https://${text}` : text;
  if (!/^(https?:\/\/|mailto:)/i.test(url)) return null;
  try {
    return new URL(url).href;
  } catch {
    return null;
  }
}

function link(label, url, image = false) {
  const href = safeUrl(url);
  if (!href) return null;
  const a = h('a', { href, target: '_blank', rel: 'noopener noreferrer nofollow' });
  if (image) {
    a.className = 'image-link';
    a.append(`[image${label ? `: ${label}` : ''}]`);
    return a;
  }
  return a;
}

/** [label](url "title") at ``start`` (the '['): {label, url, end} or null. */
function parseLink(text, start) {
  let depth = 0;
  let k = start;
  for (; k < text.length; k++) {
    if (text[k] === '\\') k++;
    else if (text[k] === '[') depth++;
    else if (text[k] === ']' && --depth === 0) break;
  }
  if (k >= text.length || text[k + 1] !== '(') return null;
  const m = /^\(\s*(<[^>\n]*>|[^\s()]*(?:\([^\s()]*\)[^\s()]*)*)(?:\s+("[^"]*"|'[^']*'))?\s*\)/.exec(text.slice(k + 1));
  if (!m) return null;
  const url = m[1].startsWith('<') ? m[1].slice(1, -1) : m[1];
  return { label: text.slice(start + 1, k), url, end: k + 1 + m[0].length };
}

/** The closing run of ``delim`` for an opener at ``from``: its index, or -1. */
function closer(text, delim, from, memo) {
  if (memo.has(delim)) return -1;
  for (let j = text.indexOf(delim, from); j >= 0; j = text.indexOf(delim, j + 1)) {
    if (j === from || /\s/.test(text[j - 1])) continue;
    if (text[j + delim.length] === delim[0]) continue; // part of a longer run: take its end
    if (delim[0] === '_' && /[\p{L}\p{N}]/u.test(text[j + delim.length] || '')) continue;
    return j;
  }
  memo.add(delim); // none after here means none after any later opener either
  return -1;
}

const EMPHASIS = [['~~', 'del'], ['**', 'strong'], ['__', 'strong'], ['*', 'em'], ['_', 'em']];

/** Appends ``text``'s inline markdown to ``el`` and returns ``el``. */
function inline(text, el, inLink = false) {
  let plain = '';
  const flush = () => {
    if (plain) el.append(plain);
    plain = '';
  };
  const memo = new Set();
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    const rest = text.slice(i, i + 8);
    if (c === '\\' && PUNCTUATION.test(text[i + 1] || '')) {
      plain += text[i + 1];
      i += 2;
      continue;
    }
    if (c === '\n') {
      flush();
      el.append(h('br'));
      i++;
      continue;
    }
    if (c === '`') {
      const run = /^`+/.exec(text.slice(i))[0];
      let end = text.indexOf(run, i + run.length);
      while (end >= 0 && text[end + run.length] === '`') end = text.indexOf(run, end + run.length + 1);
      if (end >= 0) {
        flush();
        let code = text.slice(i + run.length, end).replace(/\n/g, ' ');
        if (/^ .*[^ ].* $/.test(code)) code = code.slice(1, -1);
        el.append(h('code', {}, code));
        i = end + run.length;
      } else {
        plain += run;
        i += run.length;
      }
      continue;
    }
    if (!inLink && (c === '[' || (c === '!' && text[i + 1] === '['))) {
      const image = c === '!';
      const found = parseLink(text, image ? i + 1 : i);
      const a = found && link(found.label, found.url, image);
      if (a) {
        flush();
        if (!image) inline(found.label, a, true);
        if (!a.childNodes.length) a.append(found.url);
        el.append(a);
        i = found.end;
        continue;
      }
    }
    if (!inLink && c === '<') {
      const m = /^<((?:https?:\/\/|mailto:)[^\s<>]+)>/i.exec(text.slice(i));
      const a = m && link('', m[1]);
      if (a) {
        flush();
        el.append(append(a, [m[1]]));
        i += m[0].length;
        continue;
      }
    }
    if (!inLink && (c === 'h' || c === 'w') && !/[\p{L}\p{N}]/u.test(text[i - 1] || '')) {
      const m = BARE_URL.exec(text.slice(i));
      const a = m && link('', m[0]);
      if (a) {
        flush();
        el.append(append(a, [m[0]]));
        i += m[0].length;
        continue;
      }
    }
    const em = EMPHASIS.find(([d]) => rest.startsWith(d));
    if (em) {
      const [d, tag] = em;
      const opens = text[i + d.length] && !/\s/.test(text[i + d.length])
        && !(d[0] === '_' && /[\p{L}\p{N}]/u.test(text[i - 1] || ''));
      const end = opens ? closer(text, d, i + d.length, memo) : -1;
      if (end > i + d.length) {
        flush();
        el.append(inline(text.slice(i + d.length, end), h(tag), inLink));
        i = end + d.length;
        continue;
      }
      plain += d;
      i += d.length;
      continue;
    }
    plain += c;
    i++;
  }
  flush();
  return el;
}
