// Building DOM nodes. Text always goes in as text (text nodes, textContent), never as HTML:
// nothing in this page assigns innerHTML, so model output cannot become markup.

/** An element: h('a', {class: 'x', href: url, onclick: fn}, 'text', child, ...). */
export function h(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === 'class') el.className = value;
    else if (key === 'text') el.textContent = value;
    else if (key === 'dataset') Object.assign(el.dataset, value);
    else if (key.startsWith('on')) el.addEventListener(key.slice(2), value);
    else el.setAttribute(key, value === true ? '' : String(value));
  }
  append(el, children);
  return el;
}

/** Appends nodes and strings (as text nodes); skips null, undefined and false. */
export function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

export const $ = (selector, root = document) => root.querySelector(selector);

/** Copies text to the clipboard: the Clipboard API where the page is a secure context,
 * else a hidden textarea and execCommand (plain http on a LAN address). */
export async function copyText(text) {
  if (navigator.clipboard && window.isSecureContext) {
    try {
      await navigator.clipboard.writeText(text);
      return true;
    } catch {
      // a denied permission: try the old way
    }
  }
  const area = h('textarea', { class: 'offscreen', readonly: true });
  area.value = text;
  document.body.append(area);
  area.select();
  let ok = false;
  try {
    ok = document.execCommand('copy');
  } catch {
    ok = false;
  }
  area.remove();
  return ok;
}

/** A button that copies what text() returns and says whether it worked. */
export function copyButton(text, label = 'Copy') {
  const button = h('button', { type: 'button', class: 'copy', title: 'Copy to the clipboard' }, label);
  button.addEventListener('click', async () => {
    const ok = await copyText(text());
    button.textContent = ok ? 'Copied' : 'Copy failed';
    setTimeout(() => { button.textContent = label; }, 1500);
  });
  return button;
}

/** A random id (hex): crypto.getRandomValues works on plain http too, randomUUID does not. */
export function randomId(bytes = 12) {
  const a = crypto.getRandomValues(new Uint8Array(bytes));
  return Array.from(a, (b) => b.toString(16).padStart(2, '0')).join('');
}

/** Saves a Blob under a file name (a blob: URL of this origin, clicked). */
export function download(name, text, type = 'application/json') {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const a = h('a', { href: url, download: name });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}
