// Server-sent events read from a fetch() body, byte by byte: each event's data comes with
// the byte offset just past it, which is where GET /v1/stream?from= resumes without
// repeating or losing an event (the offset counts bytes from the start of the stream).

const decoder = new TextDecoder();

function boundary(buf, from) {
  for (let k = Math.max(from, 1); k < buf.length; k++) {
    if (buf[k] === 10 && (buf[k - 1] === 10 || (buf[k - 1] === 13 && buf[k - 2] === 10))) return k + 1;
  }
  return -1;
}

/** Yields {data, offset} for each event of ``response``'s body; ``offset`` starts at
 * ``base`` (where the read began). Comments (": ping") and empty events are skipped. */
export async function* sseEvents(response, base = 0) {
  const reader = response.body.getReader();
  let buf = new Uint8Array(0);
  let offset = base;
  let scanned = 0;
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      const joined = new Uint8Array(buf.length + value.length);
      joined.set(buf);
      joined.set(value, buf.length);
      buf = joined;
      let end;
      while ((end = boundary(buf, scanned)) >= 0) {
        const text = decoder.decode(buf.subarray(0, end));
        offset += end;
        buf = buf.slice(end);
        scanned = 0;
        const data = text.split(/\r?\n/)
          .filter((line) => line.startsWith('data:'))
          .map((line) => line.slice(line[5] === ' ' ? 6 : 5))
          .join('\n');
        if (data) yield { data, offset };
      }
      scanned = Math.max(0, buf.length - 2);
    }
  } finally {
    reader.cancel().catch(() => {}); // a reader that stops early closes the connection
  }
}
