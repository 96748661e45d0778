// Replies: POST /v1/chat/completions streamed, with "X-Conversation-Id" so that the server
// keeps the reply going in a resumable stream when the page goes away. A reload finds it
// with POST /v1/streams/lookup and reads the rest with GET /v1/stream?conv_id=&from=<the
// byte offset the saved reply reaches>; Stop (or Esc) ends it with DELETE /v1/stream.
// In router mode the id is "<conversation>::<model>", as llama-server's UI names it.

import { ApiError, getJson, request } from './api.js';
import { sseEvents } from './sse.js';
import { effective, requestFields } from './settings.js';

export function streamIdOf(conv) {
  return conv.model ? `${conv.id}::${conv.model}` : conv.id;
}

/** The request's messages: the system prompt, then the conversation before ``upto``. */
export function chatMessages(conv, upto) {
  const system = effective().system;
  const out = system.trim() ? [{ role: 'system', content: system }] : [];
  for (const m of conv.messages.slice(0, upto)) {
    if (m.role === 'assistant' && !m.content) continue; // a reply that failed or was cut at once
    if (m.role === 'user' && m.images && m.images.length) {
      const parts = m.images.map((url) => ({ type: 'image_url', image_url: { url } }));
      out.push({ role: 'user', content: [{ type: 'text', text: m.content }, ...parts] });
    } else {
      out.push({ role: m.role, content: m.content });
    }
  }
  return out;
}

function apply(msg, chunk) {
  if (chunk.error) {
    const e = chunk.error;
    msg.error = (typeof e === 'string' ? e : e.message) || 'the server reported an error';
    msg.state = 'error';
  }
  const choice = chunk.choices && chunk.choices[0];
  const delta = choice && choice.delta;
  if (delta && typeof delta.content === 'string') msg.content += delta.content;
  if (delta && typeof delta.reasoning_content === 'string') msg.reasoning = (msg.reasoning || '') + delta.reasoning_content;
  if (chunk.timings) msg.timings = chunk.timings;
  const p = chunk.prompt_progress;
  if (p && p.total > 0) msg.progress = (p.processed || 0) / p.total;
  if (choice && choice.finish_reason) msg.finish = choice.finish_reason;
}

/** Runs replies; ``changed(conv, msg, final)`` is told of every change (the caller draws
 * and saves). At most one reply per conversation. */
export class Replies {
  constructor(changed) {
    this.changed = changed;
    this.running = new Map(); // conversation id -> {controller, streamId, stopping}
    // the one model's name outside router mode (/props model_alias): sent as "model" so
    // that a gateway's endpoint picker, which needs the field, routes the page's requests
    this.modelName = '';
  }

  isRunning(convId) {
    return this.running.has(convId);
  }

  async #read(conv, msg, response, base, run) {
    for await (const { data, offset } of sseEvents(response, base)) {
      msg.offset = offset;
      if (msg.state === 'resuming') msg.state = 'streaming';
      if (data === '[DONE]') break;
      try {
        apply(msg, JSON.parse(data));
      } catch {
        continue; // not JSON: nothing this page knows
      }
      this.changed(conv, msg, false);
    }
    if (msg.state === 'streaming' || msg.state === 'resuming') msg.state = run.stopping ? 'stopped' : 'done';
  }

  async #run(conv, msg, open) {
    const run = { controller: new AbortController(), streamId: msg.streamId, stopping: false };
    this.running.set(conv.id, run);
    try {
      const { response, base } = await open(run);
      await this.#read(conv, msg, response, base, run);
    } catch (e) {
      if (run.stopping) {
        msg.state = 'stopped';
      } else if (e.name === 'AbortError') {
        return; // the page is going away: the reply goes on on the server, a reload resumes it
      } else {
        msg.state = msg.content ? 'stopped' : 'error';
        msg.error = e instanceof ApiError ? e.message : `the connection failed: ${e.message}`;
      }
    } finally {
      if (this.running.get(conv.id) === run) this.running.delete(conv.id);
    }
    this.changed(conv, msg, true);
  }

  /** Generates ``msg`` (the last message of ``conv``, an empty reply). */
  start(conv, msg) {
    Object.assign(msg, { content: '', reasoning: '', state: 'streaming', offset: 0, streamId: streamIdOf(conv) });
    delete msg.error;
    delete msg.timings;
    delete msg.interrupted;
    const body = {
      ...requestFields(),
      messages: chatMessages(conv, conv.messages.indexOf(msg)),
      stream: true,
      timings_per_token: true,
      return_progress: true,
    };
    const model = conv.model || this.modelName;
    if (model) body.model = model;
    return this.#run(conv, msg, async (run) => {
      const response = await request('v1/chat/completions', {
        method: 'POST', json: body, headers: { 'X-Conversation-Id': run.streamId }, signal: run.controller.signal,
      });
      return { response, base: 0 };
    });
  }

  /** After a reload: reads the rest of a reply the page was streaming, if the server still
   * holds it; else marks it interrupted. */
  async resume(conv, msg) {
    const streamId = msg.streamId || streamIdOf(conv);
    msg.streamId = streamId;
    let sessions = [];
    try {
      sessions = await getJson('v1/streams/lookup', { method: 'POST', json: { conversation_ids: [streamId] } });
    } catch {
      sessions = [];
    }
    if (!sessions.some((s) => s.conversation_id === streamId)) {
      msg.state = msg.content ? 'done' : 'error';
      msg.interrupted = true;
      this.changed(conv, msg, true);
      return;
    }
    msg.state = 'resuming';
    this.changed(conv, msg, false);
    const base = msg.offset || 0;
    await this.#run(conv, msg, async (run) => {
      const path = `v1/stream?conv_id=${encodeURIComponent(streamId)}&from=${base}`;
      try {
        return { response: await request(path, { signal: run.controller.signal }), base };
      } catch (e) {
        if (e instanceof ApiError && (e.status === 400 || e.status === 404)) msg.interrupted = true;
        throw e;
      }
    });
  }

  /** Stops the reply of ``conv``: the read ends and the server cancels the generation. */
  async stop(conv) {
    const run = this.running.get(conv.id);
    if (!run) return;
    run.stopping = true;
    run.controller.abort();
    const path = `v1/stream?conv_id=${encodeURIComponent(run.streamId)}`;
    await request(path, { method: 'DELETE' }).catch(() => {});
  }
}
