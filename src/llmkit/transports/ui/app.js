// The llmkit chat page: models from v1/models, replies streamed over the v1/ws WebSocket.
// Every URL is relative to the page, so it works wherever the app is mounted.
"use strict";

(() => {
  const PROTOCOL = "llmkit.json";
  const DEMO_MODEL = "demo"; // the random-weight demo, whatever name it is served under
  const KEY_STORAGE = "llmkit.apiKey";
  const $ = (id) => document.getElementById(id);
  const ui = {
    model: $("model"),
    maxTokens: $("max-tokens"),
    newChat: $("new-chat"),
    demoNote: $("demo-note"),
    keyForm: $("key-form"),
    keyHelp: $("key-help"),
    key: $("api-key"),
    conversation: $("conversation"),
    status: $("status"),
    chatForm: $("chat-form"),
    message: $("message"),
    send: $("send"),
    stop: $("stop"),
  };
  let roots = {}; // model id -> what it was loaded from (/v1/models' root)
  // The conversation as the server sees it: every turn is sent again with the next one.
  const history = [];
  let socket = null;
  let opened = null;
  let current = null; // the reply streaming now
  let counter = 0;

  const apiKey = () => sessionStorage.getItem(KEY_STORAGE) || "";
  const setStatus = (text) => {
    ui.status.textContent = text;
  };

  function showKeyForm(message) {
    ui.keyHelp.textContent = message;
    ui.keyForm.hidden = false;
    ui.send.disabled = true;
    ui.key.focus();
  }

  // Lists the models, or asks for a key when the server wants one; ``quiet`` leaves the
  // status line as it is unless a key is needed.
  async function loadModels(quiet = false) {
    const key = apiKey();
    let response;
    try {
      response = await fetch("v1/models", {
        headers: key ? { Authorization: "Bearer " + key } : {},
      });
    } catch (err) {
      setStatus("Cannot reach the server: " + err.message);
      return false;
    }
    if (response.status === 401) {
      sessionStorage.removeItem(KEY_STORAGE);
      showKeyForm(
        key
          ? "The server refused that API key; enter another."
          : "This server needs an API key. It is kept in this tab only.",
      );
      setStatus("An API key is needed.");
      return false;
    }
    if (!response.ok) {
      setStatus(`Listing the models failed: HTTP ${response.status}`);
      return false;
    }
    const models = (await response.json()).data || [];
    const chosen = ui.model.value;
    roots = Object.fromEntries(models.map((m) => [m.id, m.root]));
    ui.model.replaceChildren(
      ...models.map((m) => new Option(m.id, m.id, false, m.id === chosen)),
    );
    showDemoNote();
    ui.keyForm.hidden = true;
    ui.model.disabled = models.length === 0;
    ui.send.disabled = models.length === 0 || current !== null;
    if (!quiet) setStatus(models.length ? "Ready." : "The server lists no models.");
    return true;
  }

  function showDemoNote() {
    ui.demoNote.hidden = roots[ui.model.value] !== DEMO_MODEL;
  }

  function closeReason(event) {
    if (event.code === 1013) return "the server is busy (too many connections); try again";
    if (event.code === 1009) return "the message was too large for the server";
    if (event.code === 1006) return "the server refused or dropped the connection";
    return `the connection closed (code ${event.code}${event.reason ? ": " + event.reason : ""})`;
  }

  function connect() {
    if (socket && socket.readyState <= WebSocket.OPEN) return opened;
    const url = new URL("v1/ws", location.href);
    url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
    url.search = "";
    url.hash = "";
    const key = apiKey();
    // Browsers cannot set Authorization on a WebSocket: the key travels as a subprotocol.
    const ws = new WebSocket(url, key ? [PROTOCOL, "llmkit.bearer." + key] : [PROTOCOL]);
    socket = ws;
    opened = new Promise((resolve, reject) => {
      ws.addEventListener("open", () => resolve(ws), { once: true });
      ws.addEventListener("close", (event) => reject(new Error(closeReason(event))), {
        once: true,
      });
    });
    ws.addEventListener("message", (event) => onMessage(event.data));
    ws.addEventListener("close", (event) => {
      if (socket === ws) socket = null;
      if (current) finish("failed", closeReason(event));
    });
    return opened;
  }

  function addMessage(role, text) {
    const item = document.createElement("article");
    item.className = "message " + role;
    const who = document.createElement("h2");
    who.textContent = role === "user" ? "You" : "Assistant";
    const body = document.createElement("p");
    body.className = "text";
    body.textContent = text;
    item.append(who, body);
    ui.conversation.append(item);
    item.scrollIntoView({ block: "end" });
    return item;
  }

  function rate(reply) {
    const tokens = reply.usage ? reply.usage.completion_tokens : reply.chunks;
    const seconds = (performance.now() - reply.sentAt) / 1000;
    const parts = [`${tokens} tokens`, `${(tokens / Math.max(seconds, 1e-3)).toFixed(1)} tokens/s`];
    if (reply.firstAt) parts.push(`first token after ${Math.round(reply.firstAt - reply.sentAt)} ms`);
    return parts.join(" · ");
  }

  function onMessage(data) {
    let msg;
    try {
      msg = JSON.parse(data);
    } catch {
      return;
    }
    if (msg.type === "error" && (msg.id === null || msg.id === undefined)) {
      setStatus("Server error: " + msg.error.message);
      return;
    }
    // Messages for a reply that was stopped or given up on are left unread.
    if (!current || msg.id !== current.id) return;
    if (msg.type === "chunk") {
      const choice = (msg.data.choices || [])[0];
      const delta = choice && choice.delta && choice.delta.content;
      if (delta) {
        if (!current.firstAt) current.firstAt = performance.now();
        current.chunks += 1;
        current.text += delta;
        current.body.textContent = current.text;
      }
      if (msg.data.usage) current.usage = msg.data.usage;
      setStatus("Generating: " + rate(current));
    } else if (msg.type === "error") {
      finish("failed", msg.error.message);
    } else if (msg.type === "done") {
      finish(msg.status);
    }
  }

  function setBusy(busy) {
    ui.conversation.setAttribute("aria-busy", busy ? "true" : "false");
    ui.send.disabled = busy || ui.model.disabled;
    ui.stop.disabled = !busy;
  }

  function finish(status, error) {
    const reply = current;
    current = null;
    reply.item.classList.remove("streaming");
    if (reply.text) {
      // A stopped reply stays in the conversation as far as it got.
      history.push({ role: "assistant", content: reply.text });
    } else {
      history.pop(); // the question got no answer: it is not sent again
      reply.body.textContent = status === "cancelled" ? "(stopped)" : "";
    }
    if (status === "finished") {
      setStatus("Done: " + rate(reply));
    } else if (status === "cancelled") {
      setStatus("Stopped: " + rate(reply));
    } else {
      reply.item.classList.add("failed");
      const note = document.createElement("p");
      note.className = "error";
      note.textContent = "Error: " + (error || "the request failed");
      reply.item.append(note);
      setStatus("Failed."); // the reason is in the reply, once
    }
    setBusy(false);
    ui.message.focus();
  }

  async function send(text) {
    const model = ui.model.value;
    const maxTokens = parseInt(ui.maxTokens.value, 10);
    history.push({ role: "user", content: text });
    addMessage("user", text);
    const item = addMessage("assistant", "");
    item.classList.add("streaming");
    const id = "c" + ++counter;
    current = { id, item, body: item.querySelector(".text"), text: "", chunks: 0, usage: null };
    current.sentAt = performance.now();
    current.firstAt = 0;
    setBusy(true);
    setStatus("Sending…");
    const body = { model, messages: history.slice(), stream_options: { include_usage: true } };
    if (maxTokens > 0) body.max_tokens = maxTokens;
    let ws;
    try {
      ws = await connect();
    } catch (err) {
      if (current && current.id === id) finish("failed", err.message);
      loadModels(true); // a refused key shows the key form again
      return;
    }
    if (!current || current.id !== id) return; // stopped while connecting
    ws.send(JSON.stringify({ type: "chat.completions.create", id, body }));
  }

  function stop() {
    if (!current) return;
    ui.stop.disabled = true;
    if (socket && socket.readyState === WebSocket.OPEN) {
      socket.send(JSON.stringify({ type: "cancel", id: current.id }));
      setStatus("Stopping…");
    } else {
      finish("cancelled");
    }
  }

  ui.chatForm.addEventListener("submit", (event) => {
    event.preventDefault();
    const text = ui.message.value.trim();
    if (!text || current || ui.send.disabled) return;
    ui.message.value = "";
    send(text);
  });
  ui.message.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      ui.chatForm.requestSubmit();
    }
  });
  ui.stop.addEventListener("click", stop);
  ui.model.addEventListener("change", showDemoNote);
  ui.newChat.addEventListener("click", () => {
    if (current) {
      // What is still on its way for the old reply is left unread.
      if (socket && socket.readyState === WebSocket.OPEN) {
        socket.send(JSON.stringify({ type: "cancel", id: current.id }));
      }
      current = null;
      setBusy(false);
    }
    history.length = 0;
    ui.conversation.replaceChildren();
    if (!ui.model.disabled) setStatus("New chat.");
    ui.message.focus();
  });
  ui.keyForm.addEventListener("submit", (event) => {
    event.preventDefault();
    sessionStorage.setItem(KEY_STORAGE, ui.key.value.trim());
    ui.key.value = "";
    if (socket) socket.close(); // the next request connects with the new key
    loadModels();
  });

  loadModels();
})();
