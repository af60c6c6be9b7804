// llmkit-ws.js: a browser client for llmkit's /v1/ws WebSocket (one ES module, no
// dependencies). Many streamed requests share one socket; each is an async iterable of
// deltas, with cancel(); the client reports its connection state as "state" events.
//
//   import { LlmkitClient } from "/ui/llmkit-ws.js";
//   const client = new LlmkitClient({ url: "/v1/ws", apiKey: "..." });
//   const stream = client.chat({ model: "demo", messages: [{ role: "user", content: "Hi" }] });
//   for await (const delta of stream) out.textContent += delta.content ?? "";
//   stream.cancel(); // stops it early; the server aborts the request

const JSON_PROTOCOL = "llmkit.json";
// Browsers cannot set Authorization on a WebSocket: the key travels as a subprotocol.
const BEARER_PREFIX = "llmkit.bearer.";
// Close codes (RFC 6455) a server sends when it goes away: going away, service restart.
const SHUTDOWN_CODES = new Set([1001, 1012]);

/** A request's error: the server's OpenAI error object, as message, type, param, code. */
export class LlmkitError extends Error {
  constructor(error) {
    super(error.message);
    this.name = "LlmkitError";
    this.type = error.type ?? null;
    this.param = error.param ?? null;
    this.code = error.code ?? null;
  }
}

/** Why a socket closed, in words a person can act on. */
export function closeReason(code, reason) {
  if (SHUTDOWN_CODES.has(code)) return "the server is shutting down";
  if (code === 1013) return "the server is busy (too many connections); try again later";
  if (code === 1009) return "a message was too large for the server";
  if (code === 1006) return "the server refused or dropped the connection";
  if (reason) return reason;
  return `the connection closed (code ${code})`;
}

/** One streamed request: iterate it for deltas; `done` resolves to how it ended. */
export class LlmkitStream {
  constructor(client, id) {
    this.id = id;
    this.status = null; // "finished" | "cancelled" | "failed" once done
    this.error = null; // an LlmkitError when the request failed
    this._client = client;
    this._queue = [];
    this._wake = null;
    this.done = new Promise((resolve) => {
      this._resolveDone = resolve;
    });
  }

  /** Stop the request; it ends with status "cancelled". */
  cancel() {
    if (this.status === null) this._client._cancel(this);
  }

  async *[Symbol.asyncIterator]() {
    for (;;) {
      if (this._queue.length) {
        yield this._queue.shift();
      } else if (this.status !== null) {
        if (this.error) throw this.error;
        return;
      } else {
        await new Promise((resolve) => {
          this._wake = resolve;
        });
      }
    }
  }

  _push(delta) {
    this._queue.push(delta);
    this._notify();
  }

  _end(status, error = null) {
    if (this.status !== null) return;
    this.error = this.error || error;
    this.status = this.error && status !== "cancelled" ? "failed" : status;
    this._resolveDone(this.status);
    this._notify();
  }

  _notify() {
    const wake = this._wake;
    this._wake = null;
    if (wake) wake();
  }
}

/** What one chunk carries, for chat and completion chunks alike. */
function deltaOf(data) {
  const choice = (data.choices || [])[0] || {};
  const delta = choice.delta || {};
  return {
    content: delta.content ?? choice.text ?? null,
    reasoning: delta.reasoning ?? delta.reasoning_content ?? null,
    toolCalls: delta.tool_calls ?? null,
    finishReason: choice.finish_reason ?? null,
    usage: data.usage ?? null,
    data,
  };
}

/**
 * The connection: `state` is "closed", "connecting" or "open"; each change is a "state"
 * event whose detail has the state and, when closed, code, reason and shuttingDown.
 * Errors about no request (a bad message) are "error" events with an LlmkitError.
 */
export class LlmkitClient extends EventTarget {
  constructor({ url = "v1/ws", apiKey = "" } = {}) {
    super();
    const ws = new URL(url, globalThis.document ? document.baseURI : location.href);
    ws.protocol = ws.protocol === "https:" ? "wss:" : ws.protocol === "http:" ? "ws:" : ws.protocol;
    this.url = ws.href;
    this.apiKey = apiKey;
    this.state = "closed";
    this._socket = null;
    this._opened = null;
    this._streams = new Map();
    this._counter = 0;
  }

  /** Open the socket (once); resolves when it is open, rejects with why it closed. */
  connect() {
    if (this._socket) return this._opened;
    const protocols = [JSON_PROTOCOL];
    if (this.apiKey) protocols.push(BEARER_PREFIX + this.apiKey);
    const socket = new WebSocket(this.url, protocols);
    this._socket = socket;
    this._setState({ state: "connecting" });
    this._opened = new Promise((resolve, reject) => {
      socket.addEventListener("open", () => {
        this._setState({ state: "open" });
        resolve();
      });
      socket.addEventListener("close", (event) => {
        const reason = closeReason(event.code, event.reason);
        reject(new Error(reason));
        this._closed(socket, event.code, reason);
      });
    });
    this._opened.catch(() => {}); // a caller that never awaited it is told by "state"
    socket.addEventListener("message", (event) => this._receive(event.data));
    return this._opened;
  }

  /** Close the socket; requests in flight fail, as the server aborts them. */
  close() {
    if (this._socket) this._socket.close(1000, "closed by the client");
  }

  /** A streamed chat completion: `body` as for POST /v1/chat/completions. */
  chat(body) {
    return this._start("chat.completions.create", body);
  }

  /** A streamed completion: `body` as for POST /v1/completions. */
  complete(body) {
    return this._start("completions.create", body);
  }

  _start(type, body) {
    const stream = new LlmkitStream(this, "r" + ++this._counter);
    this._streams.set(stream.id, stream);
    this.connect().then(
      () => {
        if (stream.status !== null) return; // cancelled while connecting
        this._socket.send(JSON.stringify({ type, id: stream.id, body }));
      },
      (err) => this._finish(stream, "failed", new LlmkitError({ message: err.message })),
    );
    return stream;
  }

  _cancel(stream) {
    if (this.state === "open" && this._streams.has(stream.id)) {
      this._socket.send(JSON.stringify({ type: "cancel", id: stream.id }));
    } else {
      this._finish(stream, "cancelled");
    }
  }

  _finish(stream, status, error = null) {
    this._streams.delete(stream.id);
    stream._end(status, error);
  }

  _receive(frame) {
    let msg;
    try {
      msg = JSON.parse(frame);
    } catch {
      return;
    }
    const stream = msg.id == null ? null : this._streams.get(msg.id);
    if (msg.type === "error" && !stream) {
      this.dispatchEvent(new CustomEvent("error", { detail: new LlmkitError(msg.error) }));
    } else if (!stream) {
      return; // a request this client already gave up on
    } else if (msg.type === "chunk") {
      stream._push(deltaOf(msg.data));
    } else if (msg.type === "error") {
      stream.error = new LlmkitError(msg.error);
    } else if (msg.type === "done") {
      this._finish(stream, msg.status);
    }
  }

  _closed(socket, code, reason) {
    if (this._socket !== socket) return;
    this._socket = null;
    for (const stream of [...this._streams.values()]) {
      this._finish(stream, "failed", new LlmkitError({ message: reason, code: "connection_closed" }));
    }
    this._setState({ state: "closed", code, reason, shuttingDown: SHUTDOWN_CODES.has(code) });
  }

  _setState(detail) {
    this.state = detail.state;
    this.dispatchEvent(new CustomEvent("state", { detail }));
  }
}
