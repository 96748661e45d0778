// Conversations, kept in this browser (IndexedDB, one database per origin): nothing of them
// is stored on the server. A conversation is
//   {id, title, created, updated, model, messages: [message]}
// and a message {id, role: 'user' | 'assistant', content, reasoning?, images?: [data URL],
// state?: 'streaming' | 'done' | 'stopped' | 'error', error?, timings?, offset?}, where
// ``offset`` is the byte offset of the resumable stream that ``content`` reaches.

const DB_NAME = 'pyllama-webui';
const STORE = 'conversations';
let opened = null;

function db() {
  if (!opened) {
    opened = new Promise((resolve, reject) => {
      const req = indexedDB.open(DB_NAME, 1);
      req.onupgradeneeded = () => req.result.createObjectStore(STORE, { keyPath: 'id' });
      req.onsuccess = () => resolve(req.result);
      req.onerror = () => reject(req.error);
    });
  }
  return opened;
}

async function run(mode, action) {
  const database = await db();
  return new Promise((resolve, reject) => {
    const tx = database.transaction(STORE, mode);
    const req = action(tx.objectStore(STORE));
    tx.oncomplete = () => resolve(req.result);
    tx.onerror = () => reject(tx.error);
    tx.onabort = () => reject(tx.error);
  });
}

/** Every conversation, the most recently updated first. */
export async function listConversations() {
  const all = await run('readonly', (s) => s.getAll());
  return all.sort((a, b) => b.updated - a.updated);
}

export const getConversation = (id) => run('readonly', (s) => s.get(id));

/** Stores a snapshot (a structured clone: later changes to ``conv`` need another save). */
export const saveConversation = (conv) => run('readwrite', (s) => s.put(conv));

export const deleteConversation = (id) => run('readwrite', (s) => s.delete(id));

/** A title from the first user message: its first line, at most 60 characters. */
export function titleOf(conv) {
  const first = conv.messages.find((m) => m.role === 'user');
  const line = first ? first.content.trim().split('\n')[0] : '';
  return line.length > 60 ? `${line.slice(0, 57)}...` : line || 'New chat';
}
